// SPDX-License-Identifier: Apache-2.0
// JSON reading and writing (RFC 8259) for the engine's own files; see json.h.
#include <spur/json.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>

#include <spur/error.h>

namespace spur::json {
namespace {

const char* type_name(const Value& v) {
  if (v.is_null()) return "null";
  if (v.is_bool()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void wrong_type(const Value& v, const std::string& what, const char* wanted) {
  throw Error(what + " must be " + wanted + ", not " + type_name(v));
}

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("invalid JSON at byte " + std::to_string(pos_) + ": " + why);
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }

  Value value(int depth) {
    if (depth > 256) fail("nested too deeply");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (literal("true")) return Value(true);
    if (literal("false")) return Value(false);
    if (literal("null")) return Value();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value object(int depth) {
    expect('{');
    Object members;
    if (consume('}')) return Value(std::move(members));
    do {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a key");
      std::string key = string();
      for (const auto& [existing, unused] : members) {
        if (existing == key) fail("duplicate key \"" + key + "\"");
      }
      expect(':');
      members.emplace_back(std::move(key), value(depth + 1));
    } while (consume(','));
    expect('}');
    return Value(std::move(members));
  }

  Value array(int depth) {
    expect('[');
    Array items;
    if (consume(']')) return Value(std::move(items));
    do {
      items.push_back(value(depth + 1));
    } while (consume(','));
    expect(']');
    return Value(std::move(items));
  }

  void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > text_.size()) fail("short \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9') code |= h - '0';
      else if (h >= 'a' && h <= 'f') code |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') code |= h - 'A' + 10;
      else fail("bad \\u escape");
    }
    return code;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t code = hex4();
          if (code >= 0xD800 && code < 0xDC00 && text_.compare(pos_, 2, "\\u") == 0) {
            pos_ += 2;
            const uint32_t low = hex4();
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          fail(std::string("bad escape \\") + e);
      }
    }
  }

  Value number() {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    bool is_float = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_float = true;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string token = text_.substr(start, pos_ - start);
    char* end = nullptr;
    if (!is_float) {
      errno = 0;
      const long long v = std::strtoll(token.c_str(), &end, 10);
      if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(v));
    }
    const double d = std::strtod(token.c_str(), &end);
    if (*end != '\0' || token == "-") fail("bad number '" + token + "'");
    return Value(d);
  }

  const std::string& text_;
  size_t pos_ = 0;
};

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (const unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void write_value(std::string& out, const Value& v) {
  if (v.is_null()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_number()) {
    const double d = v.as_double();
    if (!std::isfinite(d)) throw Error("JSON cannot hold " + std::to_string(d));
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.17g", d);
    out += buffer;
    // A whole number written from a double stays a double when read back ("1.0", "-0.0", as Python's json
    // writes them): "-0" would come back as the integer 0 (found by tests/fuzz/fuzz_json).
    if (std::strpbrk(buffer, ".eE") == nullptr) out += ".0";  // (non-finite values were refused above)
  } else if (v.is_string()) {
    write_string(out, v.as_string());
  } else if (v.is_array()) {
    out += '[';
    const char* separator = "";
    for (const auto& item : v.as_array()) {
      out += separator;
      write_value(out, item);
      separator = ", ";
    }
    out += ']';
  } else {
    out += '{';
    const char* separator = "";
    for (const auto& [key, item] : v.as_object()) {
      out += separator;
      write_string(out, key);
      out += ": ";
      write_value(out, item);
      separator = ", ";
    }
    out += '}';
  }
}

}  // namespace

bool Value::as_bool(const std::string& what) const {
  if (!is_bool()) wrong_type(*this, what, "a boolean");
  return std::get<bool>(data_);
}
int64_t Value::as_int(const std::string& what) const {
  if (!is_int()) wrong_type(*this, what, "an integer");
  return std::get<int64_t>(data_);
}
double Value::as_double(const std::string& what) const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(data_));
  if (!is_number()) wrong_type(*this, what, "a number");
  return std::get<double>(data_);
}
const std::string& Value::as_string(const std::string& what) const {
  if (!is_string()) wrong_type(*this, what, "a string");
  return std::get<std::string>(data_);
}
const Array& Value::as_array(const std::string& what) const {
  if (!is_array()) wrong_type(*this, what, "an array");
  return *std::get<std::shared_ptr<Array>>(data_);
}
const Object& Value::as_object(const std::string& what) const {
  if (!is_object()) wrong_type(*this, what, "an object");
  return *std::get<std::shared_ptr<Object>>(data_);
}
const Value* Value::find(const std::string& key) const {
  if (!is_object()) return nullptr;
  for (const auto& [name, value] : as_object()) {
    if (name == key) return &value;
  }
  return nullptr;
}
const Value& Value::at(const std::string& key, const std::string& what) const {
  if (const Value* v = find(key)) return *v;
  throw Error(what + " has no \"" + key + "\"");
}

Value parse(const std::string& text) { return Parser(text).document(); }

std::string write(const Value& value) {
  std::string out;
  write_value(out, value);
  return out;
}

}  // namespace spur::json
