// SPDX-License-Identifier: Apache-2.0
// spur::Error: the one exception type the engine throws for bad input or a failed run set-up.
// Its message names what is at fault (the variable, host, port, rank or file) and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace spur {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace spur
