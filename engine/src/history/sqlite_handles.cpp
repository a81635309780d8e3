// The thin RAII layer over the sqlite3 C API (db.h): a connection, a
// prepared statement, a write transaction.
#include <baton/core/error.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "db.h"

namespace baton::history_detail {

Db::Db(const std::string& path, int flags) : path_(path) {
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw RuntimeError(path + ": cannot open the history database (" + msg + ")");
  }
  sqlite3_extended_result_codes(db_, 1);
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Db& Db::operator=(Db&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = o.db_;
    path_ = std::move(o.path_);
    o.db_ = nullptr;
  }
  return *this;
}

void Db::fail(const std::string& what) const {
  throw RuntimeError(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

void Db::exec(const char* sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw RuntimeError(path_ + ": " + msg);
  }
}

int64_t Db::scalar_int(const char* sql) const {
  Stmt st(*this, sql);
  return st.step() ? st.col_int(0) : 0;
}

Stmt::Stmt(const Db& db, std::string_view sql) : db_(&db) {
  if (sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                         SQLITE_PREPARE_PERSISTENT, &st_, nullptr) != SQLITE_OK) {
    db.fail("cannot prepare \"" + std::string(sql.substr(0, 60)) + "\"");
  }
}

Stmt::~Stmt() {
  if (st_) sqlite3_finalize(st_);
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (st_) sqlite3_finalize(st_);
    st_ = o.st_;
    db_ = o.db_;
    o.st_ = nullptr;
  }
  return *this;
}

// A bind fails on a bad index or when SQLite is out of memory: either
// would silently store NULL, so it is an error naming the statement.
Stmt& Stmt::checked_bind(int rc, int i) {
  if (rc != SQLITE_OK) {
    db_->fail("cannot bind parameter " + std::to_string(i) + " of \"" +
              std::string(sqlite3_sql(st_)).substr(0, 60) + "\"");
  }
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) { return checked_bind(sqlite3_bind_int64(st_, i, v), i); }

Stmt& Stmt::bind(int i, double v) {
  return checked_bind(std::isnan(v) ? sqlite3_bind_null(st_, i) : sqlite3_bind_double(st_, i, v),
                      i);
}

Stmt& Stmt::bind(int i, std::string_view v) {
  return checked_bind(
      sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), i);
}

Stmt& Stmt::bind_null(int i) { return checked_bind(sqlite3_bind_null(st_, i), i); }

bool Stmt::step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string sql = sqlite3_sql(st_) ? sqlite3_sql(st_) : "";
  sqlite3_reset(st_);
  db_->fail("\"" + sql.substr(0, 60) + "\" failed");
}

void Stmt::run() {
  step();
  reset();
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

double Stmt::col_double(int i) const {
  if (sqlite3_column_type(st_, i) == SQLITE_NULL) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(st_, i);
}

std::string Stmt::col_text(int i) const {
  const auto* p = sqlite3_column_text(st_, i);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(st_, i)))
           : std::string();
}

Transaction::Transaction(const Db& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
  open_ = true;
}

Transaction::Transaction(const Db& db, int patience_ms) : db_(db) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(patience_ms);
  for (int wait_ms = 20;; wait_ms = std::min(wait_ms * 2, 1000)) {
    const int rc = sqlite3_exec(db_.get(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) break;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
      db_.fail("BEGIN IMMEDIATE");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
  open_ = true;
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace baton::history_detail
