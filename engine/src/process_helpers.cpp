// SPDX-License-Identifier: Apache-2.0
// The Accelerator's process helpers: triggers for stopping together, split_between_processes' ranges, the
// objects gather_object and broadcast_object_list send, and find_executable_batch_size's agreement.
#include <algorithm>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include <torch/types.h>

#include <spur/accelerator.h>
#include <spur/error.h>

#include "accelerator_core.h"
#include "cuda/cuda_support.h"

namespace spur {

bool Accelerator::is_last_process() const { return process_index() == num_processes() - 1; }

void Accelerator::set_trigger() { core_->trigger = true; }

bool Accelerator::check_trigger() {
  auto flag = torch::tensor({static_cast<int64_t>(core_->trigger)}, torch::kLong);
  const bool any = detail::reduce_tensor(comm(), flag, Reduction::sum).item<int64_t>() > 0;
  if (any) core_->trigger = false;
  return any;
}

json::Value Accelerator::parse_object(const std::string& bytes) {
  try {
    return json::parse(bytes);
  } catch (const std::exception& e) {
    throw Error(std::string("an object sent between ranks could not be read back: ") + e.what());
  }
}

Accelerator::SplitRange Accelerator::split_range(int64_t length) const {
  const int64_t n = num_processes();
  const int64_t rank = process_index();
  const int64_t per = length / n;
  const int64_t extras = length % n;
  SplitRange range;
  range.begin = rank * per + std::min(rank, extras);
  range.end = range.begin + per + (rank < extras ? 1 : 0);
  range.padded = per + (extras > 0 ? 1 : 0);
  return range;
}

torch::Tensor Accelerator::split_values(const torch::Tensor& t, SplitRange range, bool pad) {
  if (t.dim() == 0) throw Error("split_between_processes: a 0-d tensor cannot be split");
  auto out = t.narrow(0, range.begin, range.end - range.begin);
  if (pad && out.size(0) < range.padded && t.size(0) > 0) {
    // The input's last row, repeated (Accelerate pads with inputs[-1]).
    const auto last = t.narrow(0, t.size(0) - 1, 1);
    std::vector<int64_t> repeats(static_cast<std::size_t>(t.dim()), 1);
    repeats[0] = range.padded - out.size(0);
    out = torch::cat({out, last.repeat(repeats)});
  }
  return out;
}

bool Accelerator::is_out_of_memory(const std::exception_ptr& error, int64_t batch_size) const {
  // The messages Accelerate's should_reduce_batch_size looks for: CUDA's allocator, and the CPU allocator's.
  static const char* const kOutOfMemory[] = {" out of memory", "DefaultCPUAllocator: can't allocate memory",
                                             "CUDNN_STATUS_NOT_SUPPORTED"};
  std::string what;
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc& e) {
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
    bool memory = false;
    for (const char* text : kOutOfMemory) memory = memory || what.find(text) != std::string::npos;
    if (!memory) return false;
  } catch (...) {
    return false;
  }
  what = what.substr(0, what.find('\n'));
  std::cerr << "spur: [rank " << process_index() << "] find_executable_batch_size: batch size " << batch_size
            << " ran out of memory (" << what << "); trying a smaller one" << std::endl;
  return true;
}

int Accelerator::agree_batch_size_outcome(int mine) {
  if (!comm()) return mine;
  // Sum of one-hot flags: any 2 wins over any 1.
  auto flags = torch::tensor({static_cast<int64_t>(mine == 1), static_cast<int64_t>(mine == 2)}, torch::kLong);
  const auto all = detail::reduce_tensor(comm(), flags, Reduction::sum);
  if (all[1].item<int64_t>() > 0) return 2;
  return all[0].item<int64_t>() > 0 ? 1 : 0;
}

void Accelerator::release_cached_memory() const {
  if (!device().is_cuda()) return;
  if (const auto* cuda = detail::cuda_support(); cuda && cuda->empty_cache) cuda->empty_cache();
}

}  // namespace spur
