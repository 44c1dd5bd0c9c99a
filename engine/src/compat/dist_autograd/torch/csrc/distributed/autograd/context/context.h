// SPDX-License-Identifier: Apache-2.0
// Stand-in for LibTorch's distributed-autograd context header, which Debian's libtorch-dev does not ship but
// c10d/reducer.hpp includes for two names only. On the include path only where the real header is missing.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

namespace torch::distributed::autograd {

// Only named by the reducer (a static_assert on GradCallback and a shared pointer it never dereferences);
// spur never runs distributed autograd, so the class stays opaque.
class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace torch::distributed::autograd
