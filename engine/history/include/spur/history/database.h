// SPDX-License-Identifier: Apache-2.0
// Database: one SQLite connection to the run history, opened in WAL mode with the schema migrated to the
// current version (the schema is defined once, in database.cpp). One thread per connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace spur::history {

/// A prepared statement; binds are 1-based, columns 0-based as in SQLite.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind_blob(int index, const void* data, size_t size);
  Statement& bind_null(int index);
  /// true: a row is ready; false: done. Throws HistoryError on failure.
  bool step();
  /// Runs to completion.
  void run();
  void reset();

  int64_t integer(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  bool null(int column) const;
  const void* blob(int column, size_t& size) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  /// The schema this build writes; older files are migrated on open.
  static constexpr int kSchemaVersion = 5;

  /// Opens (creating the file and its folder unless read_only) and migrates. Throws HistoryError naming the file.
  /// `busy_timeout_ms`: how long a write waits for another process's transaction before failing.
  /// A file the process may not write is opened read-only (reading works; writing throws).
  /// read_only: never creates or changes anything. A history that can be read but not written (read-only storage,
  /// another user's) is read as it is: when SQLite cannot set up its shared-memory file beside it, through an
  /// immutable connection, or, when its write-ahead log holds commits not yet in the file, from a private copy of
  /// both (a snapshot of the moment it was opened).
  explicit Database(const std::string& path, bool read_only = false, int busy_timeout_ms = 5000);
  /// Whether this process can write the history at `path` (the file, and the folder its -wal and -shm files go in).
  static bool writable(const std::string& path);
  /// True when this connection reads only (asked for, or the file could not be written).
  bool read_only() const { return read_only_; }
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  /// A statement prepared once per connection and reused (reset, bindings cleared): for the queries a read runs
  /// per series, thousands of times a second. The caller steps it to the end or resets it before the next use.
  Statement& prepared(const std::string& sql);
  const std::string& path() const { return path_; }
  void exec(std::string_view sql);
  int schema_version();
  /// Applies migrations up to `version` only; for tests of migrating older files.
  static void create_at_version(const std::string& path, int version);

 private:
  // Pragmas, schema check and migration after opening; throws HistoryError (busy() when another process held
  // a lock it needed).
  void set_up(bool read_only);
  // Opens `target` (a path or a file: URI) with `flags`; throws HistoryError naming path_.
  void open(const std::string& target, int flags);
  // The read-only connection's second try, when the plain one cannot read (no -shm can be made): see the constructor.
  void open_unwritable(int busy_timeout_ms);
  sqlite3* db_ = nullptr;
  std::string path_;
  bool read_only_ = false;
  std::string snapshot_;  // a private copy's folder (removed with the connection), when one was made
  std::map<std::string, std::unique_ptr<Statement>> prepared_;  // finalised before the connection closes
};

/// Database::prepared() for a scope: the statement is reset when the scope ends (a statement left stepping would keep
/// its read transaction, and so an old state of the file, open).
class Prepared {
 public:
  Prepared(Database& db, const std::string& sql) : statement_(db.prepared(sql)) {}
  ~Prepared() { statement_.reset(); }
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  Statement& operator*() { return statement_; }

 private:
  Statement& statement_;
};

/// BEGIN IMMEDIATE ... COMMIT, rolled back if the scope is left by an exception.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace spur::history
