// SPDX-License-Identifier: Apache-2.0
// The history's one schema and its migrations; see database.h. Metric points are stored in chunks (a BLOB of
// up to kChunkPoints {step, value, wall} records per row) so that reading a series of a million points is a
// few hundred row reads, not a million.
#include "spur/history/database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "spur/history/records.h"

namespace spur::history {
namespace {

// Migration N takes a file from user_version N-1 to N. Never edit one that has shipped: add the next.
const char* const kMigrations[] = {
    // 1: runs, metric series and their chunked points, console lines, status events.
    R"(CREATE TABLE runs(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT '', project TEXT NOT NULL DEFAULT '',
         status TEXT NOT NULL DEFAULT 'running', created REAL NOT NULL DEFAULT 0, started REAL NOT NULL DEFAULT 0,
         ended REAL NOT NULL DEFAULT 0, exit_code INTEGER, target TEXT NOT NULL DEFAULT 'local',
         hosts TEXT NOT NULL DEFAULT '', config TEXT NOT NULL DEFAULT '', command TEXT NOT NULL DEFAULT '',
         total_steps INTEGER NOT NULL DEFAULT 0, last_step INTEGER NOT NULL DEFAULT -1,
         pid INTEGER NOT NULL DEFAULT 0, host TEXT NOT NULL DEFAULT '');
       CREATE TABLE series(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         key TEXT NOT NULL, UNIQUE(run_id, key));
       CREATE TABLE points(id INTEGER PRIMARY KEY,
         series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
         count INTEGER NOT NULL, data BLOB NOT NULL);
       CREATE INDEX points_by_series ON points(series_id, id);
       CREATE TABLE console(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         host TEXT NOT NULL DEFAULT '', rank INTEGER NOT NULL DEFAULT -1, stream TEXT NOT NULL DEFAULT 'stdout',
         wall REAL NOT NULL, text TEXT NOT NULL);
       CREATE INDEX console_by_run ON console(run_id, id);
       CREATE TABLE events(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         wall REAL NOT NULL, status TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
       CREATE INDEX events_by_run ON events(run_id, id);)",
    // 2: notes, tags and the program's own parameters (init_trackers' config, JSON) on runs.
    R"(ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
       ALTER TABLE runs ADD COLUMN params TEXT NOT NULL DEFAULT '{}';
       CREATE TABLE run_tags(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, tag TEXT NOT NULL,
         PRIMARY KEY(run_id, tag));)",
    // 3: multi-resolution summaries of the series' full chunks (summary.h has the layout); series.summarised counts
    // the full chunks summarised (-1: none yet, a series written before: HistoryWriter::build_summaries adds them).
    // Indexes for listing runs by status, creation time, project and tag.
    R"(ALTER TABLE series ADD COLUMN summarised INTEGER NOT NULL DEFAULT -1;
       CREATE TABLE summaries(id INTEGER PRIMARY KEY,
         series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE, level INTEGER NOT NULL,
         ordinal INTEGER NOT NULL, chunk_id INTEGER NOT NULL, count INTEGER NOT NULL, step_lo INTEGER NOT NULL,
         step_hi INTEGER NOT NULL, wall_lo REAL NOT NULL, wall_hi REAL NOT NULL, data BLOB NOT NULL);
       CREATE UNIQUE INDEX summaries_by_series ON summaries(series_id, level, ordinal);
       CREATE INDEX runs_by_status ON runs(status);
       CREATE INDEX runs_by_created ON runs(created);
       CREATE INDEX runs_by_project ON runs(project);
       CREATE INDEX run_tags_by_tag ON run_tags(tag);)",
    // 4: the run a run was launched again from (the Studio's Relaunch, `spur launch --parent_run`; 0: none).
    R"(ALTER TABLE runs ADD COLUMN parent INTEGER NOT NULL DEFAULT 0;)",
    // 5: a run's files: checkpoints (save_state), exported models (save_model), its configuration (the launch).
    R"(CREATE TABLE files(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
         kind TEXT NOT NULL, path TEXT NOT NULL, step INTEGER NOT NULL DEFAULT -1, bytes INTEGER NOT NULL DEFAULT 0,
         wall REAL NOT NULL, host TEXT NOT NULL DEFAULT '');
       CREATE INDEX files_by_run ON files(run_id, id);)",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Database::kSchemaVersion);

[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& what) {
  throw HistoryError("run history " + path + ": " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

void migrate(Database& db, int target) {
  // BEGIN IMMEDIATE: two processes opening a new file at once migrate it once.
  Transaction transaction(db);
  for (int version = db.schema_version(); version < target; ++version) {
    db.exec(kMigrations[version]);
    db.exec("PRAGMA user_version = " + std::to_string(version + 1));
  }
  transaction.commit();
}

}  // namespace

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK) {
    throw HistoryError(std::string("run history: cannot prepare '") + std::string(sql.substr(0, 60)) +
                       "': " + sqlite3_errmsg(db));
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& Statement::bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind_blob(int index, const void* data, size_t size) {
  sqlite3_bind_blob64(stmt_, index, data, size, SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string message = sqlite3_errmsg(db_);
  sqlite3_reset(stmt_);
  const int primary = rc & 0xff;
  throw HistoryError("run history: " + message, primary == SQLITE_BUSY || primary == SQLITE_LOCKED);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return text ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))) : std::string();
}
bool Statement::null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
const void* Statement::blob(int column, size_t& size) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  size = static_cast<size_t>(sqlite3_column_bytes(stmt_, column));
  return data;
}

Database::Database(const std::string& path, bool read_only, int busy_timeout_ms) : path_(path) {
  if (!read_only) {
    // The history holds consoles and configurations, which can hold secrets: folders Spur creates are its
    // owner's only (0700), and so is a new database (0600); SQLite gives its -wal and -shm files the database's
    // permissions. An existing file keeps what its owner chose.
    const auto folder = std::filesystem::path(path).parent_path();
    if (!folder.empty()) {
      std::vector<std::filesystem::path> created;
      std::error_code unknown;  // a folder that cannot even be checked: left to SQLite to report
      for (auto missing = folder; !missing.empty() && !std::filesystem::exists(missing, unknown) && !unknown;
           missing = missing.parent_path()) {
        created.push_back(missing);
        if (missing == missing.parent_path()) break;
      }
      std::error_code ignored;
      std::filesystem::create_directories(folder, ignored);
      for (const auto& made : created) ::chmod(made.c_str(), 0700);
    }
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);  // new and empty: SQLite makes it a database
  }
  read_only_ = read_only;
  open(path, read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  // Writers queue for each other (a launcher and a training program share the file); readers never wait.
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  if (read_only) {
    try {
      set_up(true);
      return;
    } catch (const HistoryError& e) {
      if (e.busy()) {
        sqlite3_close(db_);
        db_ = nullptr;
        throw;
      }
      // Readable, but SQLite cannot make or write the -shm file a WAL database needs beside it.
      sqlite3_close(db_);
      db_ = nullptr;
      open_unwritable(busy_timeout_ms);
      return;
    }
  }
  try {
    // Several processes opening a new file at once: switching it to WAL needs an exclusive lock, which SQLite
    // refuses at once ("database is locked") instead of waiting through the busy handler. Setting up is retried
    // with backoff, within the same busy timeout.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
    for (auto pause = std::chrono::milliseconds(2);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
      try {
        set_up(read_only);
        return;
      } catch (const HistoryError& e) {
        if (!e.busy() || std::chrono::steady_clock::now() + pause > deadline) throw;
        std::this_thread::sleep_for(pause);
      }
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Database::open(const std::string& target, int flags) {
  if (sqlite3_open_v2(target.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw HistoryError("run history " + path_ + ": cannot open: " + message);
  }
}

void Database::open_unwritable(int busy_timeout_ms) {
  std::error_code error;
  const auto wal = std::filesystem::file_size(path_ + "-wal", error);
  if (!error && wal > 0) {
    // Commits still in the write-ahead log: an immutable connection would not see them. Read a private copy of
    // the file and its log instead (SQLite replays the log into the copy).
    std::string folder = (std::filesystem::temp_directory_path() / "spur-history-XXXXXX").string();
    if (!::mkdtemp(folder.data()))
      throw HistoryError("run history " + path_ + ": read-only, and no private copy can be made");
    snapshot_ = folder;
    const std::string copy = folder + "/history.db";
    std::filesystem::copy_file(path_, copy, error);
    if (!error) std::filesystem::copy_file(path_ + "-wal", copy + "-wal", error);
    if (error) {
      throw HistoryError("run history " + path_ + ": read-only, and copying it to read failed: " + error.message());
    }
    open(copy, SQLITE_OPEN_READWRITE);
  } else {
    // Nothing in a log: the file is the whole history, and an immutable connection reads it with no -shm file.
    std::string uri = "file:";
    for (const unsigned char c : path_) {
      if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
        char escaped[4];
        std::snprintf(escaped, sizeof escaped, "%%%02X", c);
        uri += escaped;
      } else {
        uri += static_cast<char>(c);
      }
    }
    open(uri + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  set_up(true);
}

bool Database::writable(const std::string& path) {
  if (::access(path.c_str(), W_OK) != 0) return false;
  const auto folder = std::filesystem::path(path).parent_path();
  if (::access(folder.empty() ? "." : folder.c_str(), W_OK) == 0) return true;
  // A folder this process cannot write: enough when SQLite's -wal and -shm files are there and writable.
  return ::access((path + "-wal").c_str(), W_OK) == 0 && ::access((path + "-shm").c_str(), W_OK) == 0;
}

void Database::set_up(bool read_only) {
  const std::string& path = path_;
  {
    exec("PRAGMA foreign_keys = ON");
    if (!read_only && sqlite3_db_readonly(db_, "main") == 1) {
      if (schema_version() < kSchemaVersion) {
        throw HistoryError("run history " + path + " needs updating to this Spur's schema but cannot be written");
      }
      read_only = true;  // the OS said no: still readable
      read_only_ = true;
    }
    if (read_only) {
      if (schema_version() > kSchemaVersion) {
        throw HistoryError("run history " + path + " was written by a newer Spur (schema " +
                           std::to_string(schema_version()) + ", this one reads up to " +
                           std::to_string(kSchemaVersion) + ")");
      }
      return;
    }
    exec("PRAGMA journal_mode = WAL");
    // NORMAL in WAL: a killed process loses nothing committed; only a power cut can drop the last commits.
    exec("PRAGMA synchronous = NORMAL");
    const int version = schema_version();
    if (version > kSchemaVersion) {
      throw HistoryError("run history " + path + " was written by a newer Spur (schema " + std::to_string(version) +
                         ", this one knows up to " + std::to_string(kSchemaVersion) + ")");
    }
    if (version < kSchemaVersion) migrate(*this, kSchemaVersion);
  }
}

Database::~Database() {
  prepared_.clear();
  sqlite3_close(db_);
  if (!snapshot_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(snapshot_, ignored);
  }
}

Statement& Database::prepared(const std::string& sql) {
  auto& statement = prepared_[sql];
  if (!statement) statement = std::make_unique<Statement>(db_, sql);
  statement->reset();
  return *statement;
}

void Database::exec(std::string_view sql) {
  char* error = nullptr;
  if (const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &error); rc != SQLITE_OK) {
    const std::string message = error ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    const int primary = rc & 0xff;
    throw HistoryError("run history " + path_ + ": " + message, primary == SQLITE_BUSY || primary == SQLITE_LOCKED);
  }
}

int Database::schema_version() {
  Statement version(db_, "PRAGMA user_version");
  version.step();
  return static_cast<int>(version.integer(0));
}

void Database::create_at_version(const std::string& path, int version) {
  sqlite3* raw = nullptr;
  if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) fail(raw, path, "cannot create");
  sqlite3_close(raw);
  // Opening read-only skips migration; then apply the first `version` by hand.
  Database db(path, /*read_only=*/true);
  sqlite3_close(db.db_);
  sqlite3_open(path.c_str(), &db.db_);
  db.exec("PRAGMA journal_mode = WAL");
  migrate(db, version);
}

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace spur::history
