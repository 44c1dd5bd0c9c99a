// SPDX-License-Identifier: Apache-2.0
// The communication hooks c10d's Reducer hands DDP's gradient buckets to: the sum through shared memory when
// every rank is on this machine, or hierarchically when the ranks share machines across several, and Accelerate's
// compression hooks (fp16, bf16: torch's fp16_compress_hook and bf16_compress_hook, over either of those or the
// process group). Internal.
//
// Threads: a hook runs on the thread that runs backward (the training thread on the CPU), one bucket at a time.
#pragma once

#include <memory>

#include <torch/csrc/distributed/c10d/comm.hpp>

#include <spur/core/comm_hook.h>

namespace spur::detail {

class Communicator;

/// The hook for `hook` over `comm`: nullptr where the Reducer's own all-reduce (divide by the world size, then sum
/// through the process group) is what is wanted. Throws spur::Error where this LibTorch's Gloo cannot carry the
/// hook's type (bf16 before 2.2) and the gradients would go through Gloo.
std::unique_ptr<c10d::CommHookInterface> make_comm_hook(CommHook hook, Communicator& comm);

}  // namespace spur::detail
