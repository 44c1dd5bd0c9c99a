// SPDX-License-Identifier: Apache-2.0
// Reading TensorBoard event files; see tensorboard_reader.h. The protobuf wire format as tensorboard_events.cpp
// writes it: a varint key (field << 3 | wire type), then a varint (type 0), 8 little-endian bytes (1), a varint
// length and that many bytes (2) or 4 little-endian bytes (5). Unknown fields are skipped; groups (types 3 and 4,
// which no TensorBoard message uses) and anything running past its message's end are errors.
#include <spur/core/tensorboard_reader.h>

#include <cmath>
#include <cstring>

namespace spur::tensorboard {
namespace {

// A malformed message: caught in add_file and reported with the file, record and offset.
struct Malformed {
  std::string what;
};

uint64_t load_le(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return value;
}

class Wire {
 public:
  explicit Wire(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ == end_; }
  /// The next field's number and wire type; false at the end of the message.
  bool next(uint64_t& field, int& type) {
    if (p_ == end_) return false;
    const uint64_t key = varint();
    field = key >> 3;
    type = static_cast<int>(key & 7);
    if (field == 0) throw Malformed{"a field numbered 0"};
    return true;
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) throw Malformed{"a number cut short"};
      const auto byte = static_cast<unsigned char>(*p_++);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    throw Malformed{"a number longer than 10 bytes"};
  }
  uint64_t fixed(int bytes) {
    if (end_ - p_ < bytes) throw Malformed{"a fixed-size value cut short"};
    const uint64_t value = load_le(p_, bytes);
    p_ += bytes;
    return value;
  }
  double fixed64_double() {
    const uint64_t bits = fixed(8);
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  float fixed32_float() {
    const auto bits = static_cast<uint32_t>(fixed(4));
    float value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  std::string_view bytes() {
    const uint64_t size = varint();
    if (size > static_cast<uint64_t>(end_ - p_)) throw Malformed{"a field longer than its message"};
    const std::string_view out(p_, size);
    p_ += size;
    return out;
  }
  void skip(int type) {
    switch (type) {
      case 0:
        varint();
        return;
      case 1:
        fixed(8);
        return;
      case 2:
        bytes();
        return;
      case 5:
        fixed(4);
        return;
      default:
        throw Malformed{"wire type " + std::to_string(type) + ", which event files do not use"};
    }
  }

 private:
  const char* p_;
  const char* end_;
};

// A field's value as the expected wire type, else Malformed naming the field.
void expect(int type, int wanted, const char* field) {
  if (type != wanted) throw Malformed{std::string("field ") + field + " has wire type " + std::to_string(type)};
}

// One field of a message being read: its number, and readers that check its wire type first (naming the field
// when it is another). A field the callback of for_each_field does not read is skipped.
class Field {
 public:
  Field(Wire& wire, uint64_t number, int type) : wire_(wire), number_(number), type_(type) {}
  uint64_t number() const { return number_; }
  int type() const { return type_; }
  std::string_view bytes(const char* name) { return take(2, name).bytes(); }
  uint64_t varint(const char* name) { return take(0, name).varint(); }
  double fixed64_double(const char* name) { return take(1, name).fixed64_double(); }
  float fixed32_float(const char* name) { return take(5, name).fixed32_float(); }
  /// A repeated number: a packed run (wire type 2: elements without keys until its bytes are used up) or one
  /// element of `element_type`; `read(Wire&)` reads one element, `add` takes each.
  template <class Read, class Add>
  void numbers(int element_type, const Read& read, const Add& add) {
    if (type_ == 2) {
      read_ = true;
      Wire packed(wire_.bytes());
      while (!packed.done()) add(read(packed));
      return;
    }
    add(read(take(element_type, "tensor value")));
  }
  bool read() const { return read_; }

 private:
  Wire& take(int wanted, const char* name) {
    expect(type_, wanted, name);
    read_ = true;
    return wire_;
  }
  Wire& wire_;
  uint64_t number_;
  int type_;
  bool read_ = false;
};

// Calls on_field(Field&) for each field of `message` in order; what it leaves unread is skipped.
template <class OnField>
void for_each_field(std::string_view message, const OnField& on_field) {
  Wire wire(message);
  uint64_t number = 0;
  int type = 0;
  while (wire.next(number, type)) {
    Field field(wire, number, type);
    on_field(field);
    if (!field.read()) wire.skip(type);
  }
}

float half_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  float magnitude = 0;
  if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31) magnitude = mantissa ? NAN : INFINITY;
  else magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// TensorProto's numbers: the elements found and the first of them. dtype (types.proto): DT_FLOAT 1, DT_DOUBLE 2,
// DT_INT32 3, DT_INT64 9, DT_BOOL 10, DT_BFLOAT16 14, DT_HALF 19.
struct TensorNumbers {
  uint64_t count = 0;
  double first = 0;
  void add(double value) {
    if (count++ == 0) first = value;
  }
};

TensorNumbers tensor_numbers(std::string_view tensor) {
  uint64_t dtype = 0;
  std::string_view content;
  TensorNumbers numbers;
  const auto add = [&numbers](double value) { numbers.add(value); };
  // Repeated numeric fields come packed (wire type 2) or one by one.
  for_each_field(tensor, [&](Field& field) {
    switch (field.number()) {
      case 1:
        dtype = field.varint("dtype");
        break;
      case 4:
        content = field.bytes("tensor_content");
        break;
      case 5:
        field.numbers(
            5, [](Wire& w) { return static_cast<double>(w.fixed32_float()); }, add);
        break;
      case 6:
        field.numbers(
            1, [](Wire& w) { return w.fixed64_double(); }, add);
        break;
      case 7:
        field.numbers(
            0, [](Wire& w) { return static_cast<double>(static_cast<int32_t>(w.varint())); }, add);
        break;
      case 10:
        field.numbers(
            0, [](Wire& w) { return static_cast<double>(static_cast<int64_t>(w.varint())); }, add);
        break;
      case 11:
        field.numbers(
            0, [](Wire& w) { return static_cast<double>(w.varint() != 0); }, add);
        break;
      case 13:
        field.numbers(
            0,
            [dtype](Wire& w) {
              const auto bits = static_cast<uint16_t>(w.varint());
              return static_cast<double>(dtype == 14 ? bfloat16_to_float(bits) : half_to_float(bits));
            },
            add);
        break;
      default:
        break;
    }
  });
  if (!content.empty()) {
    int size = 0;
    switch (dtype) {
      case 1:
      case 3:
        size = 4;
        break;
      case 2:
      case 9:
        size = 8;
        break;
      case 14:
      case 19:
        size = 2;
        break;
      case 10:
        size = 1;
        break;
      default:
        return {};  // not a number
    }
    if (content.size() % static_cast<std::size_t>(size) != 0) throw Malformed{"tensor_content of a partial element"};
    numbers = {};
    numbers.count = content.size() / static_cast<std::size_t>(size);
    const uint64_t bits = load_le(content.data(), size);
    switch (dtype) {
      case 1: {
        float f = 0;
        const auto b = static_cast<uint32_t>(bits);
        std::memcpy(&f, &b, 4);
        numbers.first = f;
        break;
      }
      case 2: {
        double d = 0;
        std::memcpy(&d, &bits, 8);
        numbers.first = d;
        break;
      }
      case 3:
        numbers.first = static_cast<int32_t>(static_cast<uint32_t>(bits));
        break;
      case 9:
        numbers.first = static_cast<double>(static_cast<int64_t>(bits));
        break;
      case 10:
        numbers.first = bits != 0;
        break;
      case 14:
        numbers.first = bfloat16_to_float(static_cast<uint16_t>(bits));
        break;
      default:
        numbers.first = half_to_float(static_cast<uint16_t>(bits));
        break;
    }
  }
  return numbers;
}

}  // namespace

void EventReader::add_file(std::string_view bytes, const std::string& name) {
  std::size_t offset = 0;
  uint64_t number = 0;
  while (offset < bytes.size()) {
    ++number;
    const std::string where = name + ": record " + std::to_string(number) + " at byte " + std::to_string(offset);
    const std::size_t left = bytes.size() - offset;
    if (left < 12) {
      throw EventFileError(where + " is cut short: its 12-byte header has only " + std::to_string(left) +
                           " bytes (a file still being written, or truncated)");
    }
    const char* header = bytes.data() + offset;
    const uint64_t length = load_le(header, 8);
    if (static_cast<uint32_t>(load_le(header + 8, 4)) != masked_crc32c(header, 8)) {
      throw EventFileError(where + ": the CRC of its length does not match (not an event file, or corrupt)");
    }
    if (length > left - 12 || left - 12 - length < 4) {
      throw EventFileError(where + " is cut short: it declares " + std::to_string(length) + " bytes of data, " +
                           std::to_string(left - 12) + " bytes follow (a file still being written, or truncated)");
    }
    const std::string_view data(header + 12, length);
    const auto crc = static_cast<uint32_t>(load_le(header + 12 + length, 4));
    if (crc != masked_crc32c(data.data(), data.size())) {
      throw EventFileError(where + ": the CRC of its " + std::to_string(length) +
                           " bytes of data does not match (corrupt)");
    }
    try {
      add_event(data);
    } catch (const Malformed& bad) {
      throw EventFileError(where + " is not a TensorBoard event: " + bad.what);
    }
    for (const uint64_t part : {length, static_cast<uint64_t>(crc)}) {
      for (int i = 0; i < 8; ++i) {
        events_.fingerprint ^= (part >> (8 * i)) & 0xFF;
        events_.fingerprint *= 0x100000001b3ULL;
      }
    }
    ++events_.records;
    offset += 12 + length + 4;
  }
}

// Event { wall_time = 1 (double), step = 2 (int64), file_version = 3, summary = 5 { value = 1 (repeated) } }.
void EventReader::add_event(std::string_view event) {
  double wall = 0;
  int64_t step = 0;
  std::vector<std::string_view> values;
  for_each_field(event, [&](Field& field) {
    if (field.number() == 1) {
      wall = field.fixed64_double("wall_time");
    } else if (field.number() == 2) {
      step = static_cast<int64_t>(field.varint("step"));
    } else if (field.number() == 5) {
      for_each_field(field.bytes("summary"), [&](Field& summary) {
        if (summary.number() == 1) values.push_back(summary.bytes("summary value"));
      });
    }
  });
  if (std::isfinite(wall) && wall > 0) {
    if (events_.first_wall == 0 || wall < events_.first_wall) events_.first_wall = wall;
    if (wall > events_.last_wall) events_.last_wall = wall;
  }
  for (const auto value : values) add_value(value, step, wall);
}

// Summary.Value { tag = 1, simple_value = 2 (float), tensor = 8, metadata = 9 { plugin_data = 1 { plugin_name = 1,
// content = 2 } } }. TensorBoard keeps the plugin a tag's first metadata names for all its later values.
void EventReader::add_value(std::string_view value, int64_t step, double wall) {
  std::string tag;
  bool simple = false;
  float simple_value = 0;
  std::string_view tensor, plugin, content;
  bool has_tensor = false;
  for_each_field(value, [&](Field& field) {
    switch (field.number()) {
      case 1:
        tag = std::string(field.bytes("tag"));
        break;
      case 2:
        simple = true;
        simple_value = field.fixed32_float("simple_value");
        break;
      case 8:
        tensor = field.bytes("tensor");
        has_tensor = true;
        break;
      case 9:
        for_each_field(field.bytes("metadata"), [&](Field& metadata) {
          if (metadata.number() != 1) return;
          for_each_field(metadata.bytes("plugin_data"), [&](Field& data) {
            if (data.number() == 1) plugin = data.bytes("plugin_name");
            else if (data.number() == 2) content = data.bytes("plugin content");
          });
        });
        break;
      default:
        break;
    }
  });
  if (!plugin.empty() && plugin_.find(tag) == plugin_.end()) plugin_.emplace(tag, std::string(plugin));
  const auto known = plugin_.find(tag);
  const std::string_view tag_plugin = known == plugin_.end() ? std::string_view() : std::string_view(known->second);
  if (simple) {
    add_point(tag, {step, simple_value, wall});
  } else if (plugin == "hparams") {
    add_hparams(content);
  } else if (has_tensor && tag_plugin == "scalars") {
    const auto numbers = tensor_numbers(tensor);
    if (numbers.count == 1) add_point(tag, {step, numbers.first, wall});
    else ++events_.other_values;
  } else {
    ++events_.other_values;
  }
}

void EventReader::add_point(const std::string& tag, history::Point point) {
  auto known = index_.find(tag);
  if (known == index_.end()) {
    known = index_.emplace(tag, events_.scalars.size()).first;
    events_.scalars.emplace_back(tag, std::vector<history::Point>());
  }
  events_.scalars[known->second].second.push_back(point);
  ++events_.scalar_points;
}

// HParamsPluginData { experiment = 2, session_start_info = 3 { hparams = 1 (map<string, Value>: key = 1,
// value = 2 { number_value = 2, string_value = 3, bool_value = 4, others }), group_name = 4 },
// session_end_info = 4 { status = 1 } }.
void EventReader::add_hparams(std::string_view content) {
  for_each_field(content, [&](Field& field) {
    if (field.number() == 3) {
      std::vector<HParam> hparams;
      for_each_field(field.bytes("session_start_info"), [&](Field& info) {
        if (info.number() != 1) return;
        HParam hparam;
        bool has_value = false;
        for_each_field(info.bytes("hparams entry"), [&](Field& entry) {
          if (entry.number() == 1) {
            hparam.name = std::string(entry.bytes("hparam name"));
          } else if (entry.number() == 2) {
            // null, struct and list values are skipped: not hyperparameters TensorBoard shows.
            for_each_field(entry.bytes("hparam value"), [&](Field& value) {
              if (value.number() == 2) {
                hparam.value = value.fixed64_double("number_value");
                has_value = true;
              } else if (value.number() == 3) {
                hparam.value = std::string(value.bytes("string_value"));
                has_value = true;
              } else if (value.number() == 4) {
                hparam.value = value.varint("bool_value") != 0;
                has_value = true;
              }
            });
          }
        });
        if (has_value) {
          // A map's later entry for the same key replaces the earlier one.
          bool replaced = false;
          for (auto& earlier : hparams) {
            if (earlier.name == hparam.name) {
              earlier = hparam;
              replaced = true;
            }
          }
          if (!replaced) hparams.push_back(std::move(hparam));
        }
      });
      events_.hparams = std::move(hparams);
      events_.has_session_start = true;
    } else if (field.number() == 4) {
      for_each_field(field.bytes("session_end_info"), [&](Field& info) {
        if (info.number() != 1) return;
        const uint64_t status = info.varint("status");
        events_.session_status = status <= 3 ? static_cast<int>(status) : 0;
      });
    }
  });
}

}  // namespace spur::tensorboard
