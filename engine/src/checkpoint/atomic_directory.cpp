// SPDX-License-Identifier: Apache-2.0
// Replacing a checkpoint directory in one step: write everything into a sibling temporary directory, make it
// durable, then exchange the two names with renameat2(RENAME_EXCHANGE). A crash at any point leaves the
// previous checkpoint whole (a stale temporary is cleared by the next save). Where the file system has no
// exchange, two renames with the complete new copy named <dir>.spur-new first, so that a crash between them is
// repaired by recover_directory. Every fsync is checked.
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

// A directory's entries (renames, new files) reach the disk; a failure is an error naming the directory.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + dir.string() + " to make the checkpoint durable: " + std::strerror(errno));
  const int result = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  // EINVAL: a file system that cannot sync directories (some FUSE mounts); the renames are still atomic.
  if (result != 0 && saved != EINVAL) {
    throw Error("cannot make " + dir.string() + " durable (fsync): " + std::strerror(saved));
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

fs::path parent_of(const fs::path& path) { return path.has_parent_path() ? path.parent_path() : fs::path("."); }

}  // namespace

std::string temporary_directory(const std::string& path) { return normalized(path).string() + ".spur-tmp"; }
static std::string new_directory(const std::string& path) { return normalized(path).string() + ".spur-new"; }
static std::string old_directory(const std::string& path) { return normalized(path).string() + ".spur-old"; }

void commit_by_renames(const std::string& path) {
  const fs::path final_path = normalized(path);
  const fs::path tmp = temporary_directory(path), fresh = new_directory(path), old = old_directory(path);
  const fs::path parent = parent_of(final_path);
  std::error_code error;
  // 1. The complete new checkpoint gets a name that says so; recover_directory trusts <dir>.spur-new, never
  //    <dir>.spur-tmp (which a later save may be half-way through writing).
  fs::remove_all(fresh, error);
  fs::rename(tmp, fresh, error);
  if (error) throw Error("cannot move the new checkpoint to " + fresh.string() + ": " + error.message());
  sync_directory(parent);
  // 2. The old one aside, 3. the new one in place: a crash between them leaves no <dir>, and the next
  //    load_state or save_state puts <dir>.spur-new (else <dir>.spur-old) back.
  fs::remove_all(old, error);
  if (fs::exists(final_path, error)) {
    fs::rename(final_path, old, error);
    if (error) throw Error("cannot move " + final_path.string() + " aside: " + error.message());
  }
  fs::rename(fresh, final_path, error);
  if (error) {
    throw Error("cannot move the new checkpoint to " + final_path.string() + ": " + error.message() +
                " (the new one is in " + fresh.string() + ", the previous one in " + old.string() + ")");
  }
  // 4. Only once the renames are on disk does the old copy go.
  sync_directory(parent);
  fs::remove_all(old, error);
}

std::string recover_directory(const std::string& path) {
  const fs::path final_path = normalized(path);
  const fs::path fresh = new_directory(path), old = old_directory(path);
  std::error_code error;
  if (fs::exists(final_path, error)) return {};
  for (const auto& candidate : {fresh, old}) {
    if (!fs::is_directory(candidate, error)) continue;
    fs::rename(candidate, final_path, error);
    if (error) {
      throw Error("checkpoint " + final_path.string() + " is missing, and the copy left in " + candidate.string() +
                  " by an interrupted save cannot be moved back: " + error.message());
    }
    sync_directory(parent_of(final_path));
    fs::remove_all(old, error);  // recovered from the new copy: the old one is obsolete (else it was the old one)
    return candidate.string();
  }
  return {};
}

void commit_directory(const std::string& path) {
  const fs::path final_path = normalized(path);
  const fs::path tmp = temporary_directory(path);
  std::error_code error;
  recover_directory(path);  // a save interrupted between its renames: the last complete checkpoint first
  sync_directory(tmp);      // its entries, not just the files' contents, are on disk before the swap
  if (fs::exists(final_path, error)) {
    if (exchange(tmp, final_path) == 0) {
      // The exchange is made durable before the old checkpoint (now at tmp) is deleted.
      sync_directory(parent_of(final_path));
      fs::remove_all(tmp, error);
      fs::remove_all(old_directory(path), error);  // an older copy an interrupted save left
      return;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      throw Error("cannot replace " + final_path.string() + " with the new checkpoint: " + std::strerror(errno));
    }
    // File systems without an atomic exchange (NFS...).
    commit_by_renames(path);
    return;
  }
  fs::rename(tmp, final_path, error);
  if (error) throw Error("cannot move the new checkpoint to " + final_path.string() + ": " + error.message());
  sync_directory(parent_of(final_path));
  fs::remove_all(old_directory(path), error);  // an older copy an interrupted save left
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
