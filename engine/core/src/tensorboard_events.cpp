// SPDX-License-Identifier: Apache-2.0
// TensorBoard event encoding; see tensorboard_events.h. Protobuf wire format: a field is a varint key
// (number << 3 | wire type) then a varint (type 0), 8 little-endian bytes (1), a varint length and bytes (2) or
// 4 little-endian bytes (5). Default values (0, "") are left out, as protobuf's own encoders do.
#include <spur/core/tensorboard_events.h>

#include <array>
#include <cstdio>
#include <cstring>

namespace spur::tensorboard {
namespace {

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));  // reflected Castagnoli
    table[i] = crc;
  }
  return table;
}

// A protobuf message under construction.
class Message {
 public:
  Message& varint(int field, uint64_t value) {
    key(field, 0);
    put_varint(value);
    return *this;
  }
  Message& fixed64(int field, double value) { return fixed<uint64_t>(field, 1, value); }
  Message& fixed32(int field, float value) { return fixed<uint32_t>(field, 5, value); }
  Message& bytes(int field, std::string_view value) {
    key(field, 2);
    put_varint(value.size());
    bytes_.append(value);
    return *this;
  }
  Message& message(int field, const Message& value) { return bytes(field, value.bytes_); }
  const std::string& str() const { return bytes_; }

 private:
  // A double (wire type 1) or float (5) as its bits, little-endian.
  template <typename Bits, typename Value>
  Message& fixed(int field, int wire_type, Value value) {
    static_assert(sizeof(Bits) == sizeof(Value));
    key(field, wire_type);
    Bits bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (std::size_t i = 0; i < sizeof bits; ++i) bytes_ += static_cast<char>((bits >> (8 * i)) & 0xFF);
    return *this;
  }
  void key(int field, int wire_type) {
    put_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
  }
  void put_varint(uint64_t value) {
    while (value >= 0x80) {
      bytes_ += static_cast<char>((value & 0x7F) | 0x80);
      value >>= 7;
    }
    bytes_ += static_cast<char>(value);
  }
  std::string bytes_;
};

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3, summary = 5.
Message event(int64_t step, double wall) {
  Message m;
  m.fixed64(1, wall);
  if (step != 0) m.varint(2, static_cast<uint64_t>(step));  // two's complement, as protobuf encodes int64
  return m;
}

// SummaryMetadata { plugin_data = 1 { plugin_name = 1, content = 2 } }.
Message plugin_metadata(std::string_view plugin, std::string_view content) {
  Message data;
  data.bytes(1, plugin);
  if (!content.empty()) data.bytes(2, content);
  Message metadata;
  metadata.message(1, data);
  return metadata;
}

// Summary { value = 1 { tag = 1, metadata = 9 } }, with the plugin's content and no value (as PyTorch's hparams
// summaries are written; TensorBoard gives them an empty tensor when it reads them).
std::string plugin_event(std::string_view tag, std::string_view plugin, const Message& content, double wall) {
  Message value;
  value.bytes(1, tag).message(9, plugin_metadata(plugin, content.str()));
  Message summary;
  summary.message(1, value);
  return event(0, wall).message(5, summary).str();
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t size, uint32_t crc) {
  static const auto table = make_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, std::size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string record(std::string_view event) {
  std::string out;
  out.reserve(event.size() + 16);
  const uint64_t length = event.size();
  char header[8];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  auto put32 = [&out](uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  out.append(header, 8);
  put32(masked_crc32c(header, 8));
  out.append(event);
  put32(masked_crc32c(event.data(), event.size()));
  return out;
}

std::string event_file_name(double wall, std::string_view host, int64_t pid, int counter) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(wall));
  return "events.out.tfevents." + std::string(seconds) + "." + std::string(host) + "." + std::to_string(pid) + "." +
         std::to_string(counter);
}

std::string file_version_event(double wall) { return event(0, wall).bytes(3, "brain.Event:2").str(); }

std::string scalars_event(const std::vector<std::pair<std::string_view, double>>& values, int64_t step, double wall) {
  Message summary;
  for (const auto& [tag, number] : values) {
    Message value;
    value.bytes(1, tag).fixed32(2, static_cast<float>(number));
    summary.message(1, value);
  }
  return event(step, wall).message(5, summary).str();
}

std::string text_event(std::string_view tag, std::string_view text, int64_t step, double wall) {
  // TensorProto { dtype = 1 (DT_STRING = 7), tensor_shape = 2 { dim = 2 { size = 1 } }, string_val = 8 }.
  Message dim;
  dim.varint(1, 1);
  Message shape;
  shape.message(2, dim);
  Message tensor;
  tensor.varint(1, 7).message(2, shape).bytes(8, text);
  Message value;
  value.bytes(1, std::string(tag) + "/text_summary").message(9, plugin_metadata("text", "")).message(8, tensor);
  Message summary;
  summary.message(1, value);
  return event(step, wall).message(5, summary).str();
}

std::string session_start_event(const std::vector<HParam>& hparams, std::string_view group_name, double wall) {
  // SessionStartInfo { hparams = 1 (map<string, google.protobuf.Value>), group_name = 4, start_time_secs = 5 };
  // google.protobuf.Value { number_value = 2, string_value = 3, bool_value = 4 }.
  Message info;
  for (const auto& hparam : hparams) {
    Message value;
    if (const auto* number = std::get_if<double>(&hparam.value)) {
      value.fixed64(2, *number);
    } else if (const auto* text = std::get_if<std::string>(&hparam.value)) {
      value.bytes(3, *text);
    } else {
      value.varint(4, std::get<bool>(hparam.value) ? 1 : 0);
    }
    Message entry;
    entry.bytes(1, hparam.name).message(2, value);
    info.message(1, entry);
  }
  if (!group_name.empty()) info.bytes(4, group_name);
  info.fixed64(5, wall);
  Message data;  // HParamsPluginData { version = 1 (0), session_start_info = 3 }
  data.message(3, info);
  return plugin_event("_hparams_/session_start_info", "hparams", data, wall);
}

std::string session_end_event(bool success, double wall) {
  Message info;  // SessionEndInfo { status = 1 (SUCCESS 1, FAILURE 2), end_time_secs = 2 }
  info.varint(1, success ? 1 : 2).fixed64(2, wall);
  Message data;  // HParamsPluginData { session_end_info = 4 }
  data.message(4, info);
  return plugin_event("_hparams_/session_end_info", "hparams", data, wall);
}

}  // namespace spur::tensorboard
