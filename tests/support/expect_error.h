// SPDX-License-Identifier: Apache-2.0
// expect_error(fn): the message of the spur::Error that `fn` throws, or "no error" (header-only, for the suites that
// link Spur::spur; other exceptions pass through and fail the test).
#pragma once

#include <QString>

#include <functional>

#include <spur/error.h>

namespace spur::test {

inline QString expect_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const spur::Error& e) {
    return QString::fromUtf8(e.what());
  }
  return "no error";
}

}  // namespace spur::test
