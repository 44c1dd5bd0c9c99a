// SPDX-License-Identifier: Apache-2.0
// Must NOT compile (CTest unit.objects_compile_fail builds it and expects ObjectCodec's message): a type with no
// spur::ObjectCodec, as gather_object or broadcast_object_list would need, is refused at compile time.
#include <mutex>

#include <spur/objects.h>

int main() {
  std::mutex not_serialisable;
  auto value = spur::ObjectCodec<std::mutex>::encode(not_serialisable);
  (void)value;
  return 0;
}
