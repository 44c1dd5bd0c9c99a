// SPDX-License-Identifier: Apache-2.0
// Replacing a checkpoint directory in one step: write everything into a sibling temporary directory, make it
// durable, then exchange the two names with renameat2(RENAME_EXCHANGE). A crash at any point leaves the
// previous checkpoint whole (a stale temporary is cleared by the next save).
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <spur/checkpoint.h>
#include <spur/error.h>

namespace spur::detail {
namespace {

namespace fs = std::filesystem;

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

int exchange(const fs::path& a, const fs::path& b) {
  return static_cast<int>(::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE));
}

// "dir/" and "dir" name the same directory.
fs::path normalized(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  return p;
}

}  // namespace

std::string temporary_directory(const std::string& path) { return normalized(path).string() + ".spur-tmp"; }

void commit_directory(const std::string& path) {
  const fs::path final_path = normalized(path);
  const fs::path tmp = temporary_directory(path);
  std::error_code error;
  sync_directory(tmp);  // its entries, not just the files' contents, are on disk before the swap
  if (fs::exists(final_path, error)) {
    if (exchange(tmp, final_path) == 0) {
      fs::remove_all(tmp, error);  // now the old checkpoint
    } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
      // File systems without an atomic exchange (NFS...): two renames, with the old directory set aside
      // (as <dir>.spur-old) rather than deleted until the new one is in place.
      const fs::path old = final_path.string() + ".spur-old";
      fs::remove_all(old, error);
      fs::rename(final_path, old, error);
      if (error) throw Error("cannot move " + final_path.string() + " aside: " + error.message());
      fs::rename(tmp, final_path, error);
      if (error) throw Error("cannot move the new checkpoint to " + final_path.string() + ": " + error.message() +
                             " (the previous one is in " + old.string() + ")");
      fs::remove_all(old, error);
    } else {
      throw Error("cannot replace " + final_path.string() + " with the new checkpoint: " + std::strerror(errno));
    }
  } else {
    fs::rename(tmp, final_path, error);
    if (error) throw Error("cannot move the new checkpoint to " + final_path.string() + ": " + error.message());
  }
  sync_directory(final_path.has_parent_path() ? final_path.parent_path() : fs::path("."));
}

void replace_directory(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  const fs::path tmp = temporary_directory(path);
  std::error_code error;
  fs::remove_all(tmp, error);  // a previous save that crashed
  fs::create_directories(tmp, error);
  if (error) throw Error("cannot create " + tmp.string() + ": " + error.message());
  write(tmp.string());
  sync_directory(tmp);
  commit_directory(path);
}

}  // namespace spur::detail
