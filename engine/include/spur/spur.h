// SPDX-License-Identifier: Apache-2.0
// Everything a training program needs from Spur, in one include.
// Link Spur::spur: find_package(Spur REQUIRED) and target_link_libraries(train PRIVATE Spur::spur).
#pragma once

#include <spur/accelerator.h>
#include <spur/collectives.h>
#include <spur/error.h>
#include <spur/logging.h>
#include <spur/model.h>
#include <spur/objects.h>
#include <spur/optimizer.h>
#include <spur/options.h>
#include <spur/precision.h>
#include <spur/progress.h>
#include <spur/scope.h>
#include <spur/state.h>
#include <spur/system.h>
#include <spur/tracking.h>
#include <spur/version.h>
