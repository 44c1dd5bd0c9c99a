// SPDX-License-Identifier: Apache-2.0
// The LibTorch versions behind features the torch-free parts must know about too: the engine's compatibility
// header (src/compat/torch_compat.h) tests the version it is compiled against with these, and the `spur` command
// and the Studio (which never include torch) test the version the engine was built against, from its text
// ("1.13.0", "2.15.0+cu130"). Each version fact is written here once.
#pragma once

#include <charconv>
#include <string_view>

namespace spur::torch_features {

struct Version {
  int major = 0, minor = 0;
};

constexpr bool at_least(int major, int minor, Version since) {
  return major > since.major || (major == since.major && minor >= since.minor);
}

/// CPU autocast learnt float16 in 2.2 (PyTorch PR 112484; 1.13-2.1 reject it: "AutocastCPU only support
/// Bfloat16"), so mixed_precision fp16 on the CPU needs at least this.
inline constexpr Version kCpuAutocastHalf{2, 2};

/// Gloo sums bfloat16 tensors from 2.2 (PyTorch PR 113557; before: "Invalid scalar type"), which the bf16
/// communication hook needs where gradients travel through Gloo (ranks on several machines).
inline constexpr Version kGlooBFloat16{2, 2};

/// TCPStoreOptions::masterListenFd honoured by the default (libuv) store backend from 2.8: the rendezvous store then
/// listens on MASTER_ADDR only, not on every interface (1.13 has no way to choose).
inline constexpr Version kStoreListeningSocket{2, 8};

/// Whether LibTorch `version` ("MAJOR.MINOR[.PATCH][+LOCAL]") has what arrived in `since`; a text that is not a
/// version (an unknown build) is given the benefit of the doubt: the engine checks again when the run starts.
inline bool has(std::string_view version, Version since) {
  Version v;
  const char* end = version.data() + version.size();
  auto [dot, error] = std::from_chars(version.data(), end, v.major);
  if (error != std::errc() || dot == end || *dot != '.') return true;
  if (std::from_chars(dot + 1, end, v.minor).ec != std::errc()) return true;
  return at_least(v.major, v.minor, since);
}

}  // namespace spur::torch_features
