// SPDX-License-Identifier: Apache-2.0
// Every call whose shape differs between LibTorch 1.13 (Debian, CPU) and 2.x (CUDA wheels) lives here, behind
// SPUR_TORCH_AT_LEAST. The rest of the engine calls these and never tests versions itself.
// Compiled and tested: 1.13.0 (Debian 12's libtorch-dev) and 2.15.0 (the pinned wheel). The other 2.x branches
// follow each release's own headers (1.13.0 to 2.15.0, every x.y.0 read from the PyPI wheels), compiled by
// whoever builds against them: a version outside those is refused at compile time, not guessed.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/serialize/archive.h>
#include <torch/version.h>
// CUDA through LibTorch's device-generic API only (libspur links no CUDA library: src/cuda/cuda_support.h).
#include <ATen/Context.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/cuda.h>

#include <spur/core/torch_features.h>

#define SPUR_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace spur::compat {

// --- autocast ---------------------------------------------------------------------------------------------
// 2.4 replaced the per-device functions (set_cpu_enabled, set_autocast_gpu_dtype...) by ones taking the device.
inline bool autocast_enabled(c10::DeviceType device) {
#if SPUR_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if SPUR_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
#if SPUR_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
#if SPUR_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// --- the rendezvous store's listening socket --------------------------------------------------------------
// TCPStoreOptions::masterListenFd (a bound socket the store takes over) lets the store listen on one address; the
// libuv backend (the default) honours it from 2.8. LibTorch 1.13 has no such option: its store listens on every
// interface (docs/security.md).
#if SPUR_TORCH_AT_LEAST(2, 8)  // torch_features::kStoreListeningSocket
inline constexpr bool kStoreTakesListeningSocket = true;
inline void set_store_listening_socket(c10d::TCPStoreOptions& options, int fd) { options.masterListenFd = fd; }
#else
inline constexpr bool kStoreTakesListeningSocket = false;
inline void set_store_listening_socket(c10d::TCPStoreOptions&, int) {}
#endif

/// CPU autocast runs float16 (torch_features.h: since 2.2; the Studio's wizard asks the same question).
inline constexpr bool kCpuAutocastHalf =
    torch_features::at_least(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, torch_features::kCpuAutocastHalf);

// --- optimizers ---------------------------------------------------------------------------------------------
/// zero_grad's default on the CPU: LibTorch 2.x sets gradients to none (PyTorch's default since 2.0) and is
/// faster that way; on Debian's 1.13 with glibc's allocator, freeing them made the next backward fault its
/// buffers in again (1.3-1.4x slower steps), so they are zeroed in place there.
inline constexpr bool kZeroGradSetsToNone = SPUR_TORCH_AT_LEAST(2, 0);

// --- process groups ---------------------------------------------------------------------------------------
// In 1.13 ProcessGroupGloo/NCCL are ProcessGroups; in 2.x they are Backends that a ProcessGroup dispatches to.
template <typename Backend>
c10::intrusive_ptr<c10d::ProcessGroup> as_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                        int size, c10::intrusive_ptr<Backend> backend,
                                                        c10::DeviceType device, bool nccl,
                                                        std::chrono::milliseconds timeout) {
#if SPUR_TORCH_AT_LEAST(2, 0)
  const auto type = nccl ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO;
#if SPUR_TORCH_AT_LEAST(2, 6)
  // 2.6 dropped ProcessGroup::Options; the backend type is set afterwards (setDefaultBackend, new in 2.6).
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  group->setDefaultBackend(type);
#else
  // 2.0-2.5: the backend type is fixed at construction, through ProcessGroup::Options.
  auto group = c10::make_intrusive<c10d::ProcessGroup>(
      store, rank, size, c10::make_intrusive<c10d::ProcessGroup::Options>(nccl ? "nccl" : "gloo", timeout));
#endif
  group->setBackend(device, type, c10::intrusive_ptr<c10d::Backend>(std::move(backend)));
  return group;
#else
  (void)store, (void)rank, (void)size, (void)device, (void)nccl, (void)timeout;
  return backend;
#endif
}

// Gloo's headers come from Debian's libgloo-dev, not from the LibTorch in use (a wheel ships none): only type
// names are taken from them. ProcessGroupGloo is built by LibTorch's own constructor, and its members are pointers
// and standard containers whatever Gloo's version; this checks that the object Spur allocated is laid out as the
// library built it (its options pointer where the library stored it), so a mismatch is an error, not a crash.
inline c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::vector<std::shared_ptr<::gloo::transport::Device>> devices, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices = std::move(devices);
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  if (gloo->getOptions().get() != options.get()) {
    throw std::runtime_error(
        "c10d's ProcessGroupGloo is laid out differently from the headers Spur was compiled "
        "with (LibTorch " TORCH_VERSION "): rebuild Spur against the LibTorch it runs with");
  }
  return as_process_group(store, rank, size, gloo, c10::DeviceType::CPU, false, timeout);
}

// --- DDP's Reducer ----------------------------------------------------------------------------------------
// Its constructor, per release (reducer.hpp): 1.13-2.6 take per_bucket_size_limits (by const& from 2.4); 2.7
// drops it; 2.8 adds skip_all_reduce_unused_params and use_python_reducer; 2.11 adds bucket_bytes_cap_list; 2.12
// and 2.15 add defaulted flags (batched_grad_copy, lazy_bucket_allocation), left at their defaults here.
#if SPUR_TORCH_AT_LEAST(2, 16)
#error \
    "Spur has not been built against this LibTorch yet: check c10d::Reducer's constructor (engine/src/compat/torch_compat.h)"
#endif
inline std::unique_ptr<c10d::Reducer> make_reducer(
    std::vector<at::Tensor> params, std::vector<std::vector<size_t>> buckets, std::vector<size_t> bucket_limits,
    c10::intrusive_ptr<c10d::ProcessGroup> group, std::vector<bool> expect_sparse, int64_t bucket_cap, bool find_unused,
    bool gradient_as_bucket_view, std::unordered_map<size_t, std::string> names, int64_t first_bucket_cap) {
#if SPUR_TORCH_AT_LEAST(2, 11)
  (void)bucket_limits;
  return std::make_unique<c10d::Reducer>(
      std::move(params), std::move(buckets), std::move(group), std::move(expect_sparse), bucket_cap, find_unused,
      gradient_as_bucket_view, std::move(names), first_bucket_cap, /*skip_all_reduce_unused_params=*/false,
      /*use_python_reducer=*/false, /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
#elif SPUR_TORCH_AT_LEAST(2, 8)
  (void)bucket_limits;
  return std::make_unique<c10d::Reducer>(std::move(params), std::move(buckets), std::move(group),
                                         std::move(expect_sparse), bucket_cap, find_unused, gradient_as_bucket_view,
                                         std::move(names), first_bucket_cap, /*skip_all_reduce_unused_params=*/false,
                                         /*use_python_reducer=*/false);
#elif SPUR_TORCH_AT_LEAST(2, 7)
  (void)bucket_limits;
  return std::make_unique<c10d::Reducer>(std::move(params), std::move(buckets), std::move(group),
                                         std::move(expect_sparse), bucket_cap, find_unused, gradient_as_bucket_view,
                                         std::move(names), first_bucket_cap);
#else
  return std::make_unique<c10d::Reducer>(std::move(params), std::move(buckets), std::move(bucket_limits),
                                         std::move(group), std::move(expect_sparse), bucket_cap, find_unused,
                                         gradient_as_bucket_view, std::move(names), first_bucket_cap);
#endif
}

// --- RNG states (checkpoints) ---------------------------------------------------------------------------
// Every CUDA device's default generator, through the device-generic context (no CUDA devices: nothing).
inline void save_cuda_rng(torch::serialize::OutputArchive& archive) {
  const auto count = static_cast<c10::DeviceIndex>(torch::cuda::device_count());
  for (c10::DeviceIndex i = 0; i < count; ++i) {
    auto generator = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, i));
    std::lock_guard<std::mutex> lock(generator.mutex());
    archive.write("cuda_" + std::to_string(i), generator.get_state());
  }
}

inline void load_cuda_rng(torch::serialize::InputArchive& archive) {
  const auto count = static_cast<c10::DeviceIndex>(torch::cuda::device_count());
  for (c10::DeviceIndex i = 0; i < count; ++i) {
    at::Tensor state;
    if (archive.try_read("cuda_" + std::to_string(i), state)) {
      auto generator = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, i));
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
  }
}

// --- CUDA -------------------------------------------------------------------------------------------------
inline void set_cuda_device(c10::DeviceIndex index) {
  c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(c10::Device(c10::DeviceType::CUDA, index));
}

}  // namespace spur::compat
