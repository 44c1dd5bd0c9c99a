// SPDX-License-Identifier: Apache-2.0
// Precision names and the autocast scope. Autocast state is thread-local in ATen; the scope saves and restores
// it so nested scopes and user code that sets autocast itself keep working.
#include <spur/precision.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <string>

#include <spur/error.h>

#include "compat/torch_compat.h"

namespace spur {

namespace detail {
namespace {
std::atomic<uint64_t> scopes_opened{0};
}
uint64_t autocast_scopes_opened() { return scopes_opened.load(std::memory_order_relaxed); }
}  // namespace detail

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::fp16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
    case Precision::no:
      break;
  }
  return "no";
}

std::optional<Precision> parse_precision(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "no") return Precision::no;
  if (lower == "fp16") return Precision::fp16;
  if (lower == "bf16") return Precision::bf16;
  return std::nullopt;
}

c10::ScalarType autocast_dtype(Precision precision) {
  switch (precision) {
    case Precision::fp16:
      return c10::ScalarType::Half;
    case Precision::bf16:
      return c10::ScalarType::BFloat16;
    case Precision::no:
      break;
  }
  return c10::ScalarType::Float;
}

void check_precision_supported(Precision precision, c10::Device device) {
  if (precision == Precision::fp16 && device.is_cpu() && !compat::kCpuAutocastHalf) {
    throw Error("mixed precision fp16 needs a CUDA device: this LibTorch (" + std::string(TORCH_VERSION) +
                ") runs CPU autocast in bf16 only. Use mixed_precision bf16 on CPU, or run on a GPU");
  }
}

AutocastScope::AutocastScope(c10::Device device, Precision precision) {
  if (precision == Precision::no) return;
  check_precision_supported(precision, device);
  device_type_ = device.type();
  previous_enabled_ = compat::autocast_enabled(device_type_);
  previous_dtype_ = compat::autocast_dtype(device_type_);
  compat::set_autocast_enabled(device_type_, true);
  compat::set_autocast_dtype(device_type_, autocast_dtype(precision));
  at::autocast::increment_nesting();
  active_ = true;
  detail::scopes_opened.fetch_add(1, std::memory_order_relaxed);
}

AutocastScope::AutocastScope(AutocastScope&& other) noexcept
    : active_(std::exchange(other.active_, false)),
      device_type_(other.device_type_),
      previous_enabled_(other.previous_enabled_),
      previous_dtype_(other.previous_dtype_) {}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Cached casts of the weights belong to this forward pass only, as in torch.autocast's __exit__.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast_enabled(device_type_, previous_enabled_);
  compat::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace spur
