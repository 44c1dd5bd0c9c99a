// SPDX-License-Identifier: Apache-2.0
// A small JSON value, reader and writer for the engine's own files (safetensors headers, checkpoint state).
// Torch-free and Qt-free; objects keep their keys' order. Parse errors say where (byte offset) and why.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace spur::json {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

class Value {
 public:
  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : data_(b) {}
  Value(int v) : data_(static_cast<int64_t>(v)) {}
  Value(int64_t v) : data_(v) {}
  Value(uint64_t v) : data_(static_cast<int64_t>(v)) {}
  Value(double v) : data_(v) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(Array a) : data_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : data_(std::make_shared<Object>(std::move(o))) {}

  bool is_null() const { return std::holds_alternative<std::monostate>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_int() const { return std::holds_alternative<int64_t>(data_); }
  bool is_number() const { return is_int() || std::holds_alternative<double>(data_); }
  bool is_string() const { return std::holds_alternative<std::string>(data_); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(data_); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(data_); }

  // Accessors throw spur::Error naming `what` when the value has another type.
  bool as_bool(const std::string& what = "value") const;
  int64_t as_int(const std::string& what = "value") const;
  double as_double(const std::string& what = "value") const;
  const std::string& as_string(const std::string& what = "value") const;
  const Array& as_array(const std::string& what = "value") const;
  const Object& as_object(const std::string& what = "value") const;
  /// The member `key` of an object, or nullptr.
  const Value* find(const std::string& key) const;
  /// The member `key`; spur::Error naming `what` and the key when missing.
  const Value& at(const std::string& key, const std::string& what = "object") const;

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>, std::shared_ptr<Object>>
      data_;
};

Value parse(const std::string& text);
/// Compact, with ", " and ": " separators (as Python's json.dumps).
std::string write(const Value& value);

}  // namespace spur::json
