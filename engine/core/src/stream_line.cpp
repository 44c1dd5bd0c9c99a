// SPDX-License-Identifier: Apache-2.0
// The keyed record lines; see stream_line.h.
#include <spur/core/stream_line.h>

#include <random>

namespace spur::stream_line {

std::string prefix(std::string_view key) {
  return key.empty() ? std::string("@spur ") : "@spur:" + std::string(key) + " ";
}

std::optional<std::string_view> record(std::string_view line, std::string_view key) {
  constexpr std::string_view head = "@spur:";
  if (key.empty() || line.substr(0, head.size()) != head) return std::nullopt;
  const auto given = line.substr(head.size(), key.size());
  if (given.size() != key.size() || line.size() <= head.size() + key.size() + 1 ||
      line[head.size() + key.size()] != ' ') {
    return std::nullopt;
  }
  unsigned char differ = 0;  // constant time: a rank cannot find the key a character at a time
  for (size_t i = 0; i < key.size(); ++i) differ |= static_cast<unsigned char>(given[i] ^ key[i]);
  if (differ != 0) return std::nullopt;
  auto json = line.substr(head.size() + key.size() + 1);
  while (!json.empty() && (json.back() == ' ' || json.back() == '\r' || json.back() == '\t')) json.remove_suffix(1);
  if (json.size() < 2 || json.front() != '{' || json.back() != '}') return std::nullopt;
  return json;
}

std::string new_key() {
  std::random_device random;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key;
  for (int i = 0; i < 32; ++i) key += kHex[random() & 15u];
  return key;
}

}  // namespace spur::stream_line
