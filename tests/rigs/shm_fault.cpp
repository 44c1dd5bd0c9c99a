// SPDX-License-Identifier: Apache-2.0
// A fault for the shared-memory all-reduce's tests, loaded into one rank with LD_PRELOAD: SPUR_SHM_FAULT=die_opening
// makes the rank die (exit 9, as a kill would) the moment it opens the segment another rank made, before it
// attaches; die_unlinking makes it die when it unlinks its own segment, after the others attached and before the
// name is gone. Nothing else changes: every other call goes to the C library.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

bool fault(const char* wanted) {
  const char* fault = std::getenv("SPUR_SHM_FAULT");
  return fault && std::strcmp(fault, wanted) == 0;
}

bool segment(const char* name) { return name && std::strncmp(name, "/spur-", 6) == 0 && std::isdigit(name[6]); }

}  // namespace

extern "C" int shm_open(const char* name, int flags, mode_t mode) {
  using Open = int (*)(const char*, int, mode_t);
  static const auto real = reinterpret_cast<Open>(dlsym(RTLD_NEXT, "shm_open"));
  if (segment(name) && !(flags & O_CREAT) && fault("die_opening")) _exit(9);
  return real(name, flags, mode);
}

extern "C" int shm_unlink(const char* name) {
  using Unlink = int (*)(const char*);
  static const auto real = reinterpret_cast<Unlink>(dlsym(RTLD_NEXT, "shm_unlink"));
  const std::string own = "/spur-" + std::to_string(::getpid()) + "-";
  if (name && std::strncmp(name, own.c_str(), own.size()) == 0 && fault("die_unlinking")) _exit(9);
  return real(name);
}
