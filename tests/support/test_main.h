// SPDX-License-Identifier: Apache-2.0
// One main() for a fat Qt Test binary holding many test classes: `binary` runs them all, `binary Class [qtest
// args]` runs one (CTest registers one test per class). Classes register with SPUR_TEST_CLASS(Name).
#pragma once

#include <QObject>

#include <functional>
#include <memory>
#include <vector>

namespace spur::test {

struct TestClass {
  const char* name;
  std::function<std::unique_ptr<QObject>()> make;
};

std::vector<TestClass>& registry();

struct Registration {
  Registration(const char* name, std::function<std::unique_ptr<QObject>()> make) {
    registry().push_back({name, std::move(make)});
  }
};

}  // namespace spur::test

#define SPUR_TEST_CLASS(Class)                                       \
  static const ::spur::test::Registration spur_registration_##Class( \
      #Class, [] { return std::unique_ptr<QObject>(new Class); });
