#include "db.h"

#include <baton/core/error.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

namespace baton::history_detail {
namespace fs = std::filesystem;

namespace {

std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

// Why this process cannot write the history at `path` (the file or, for
// its journal, its folder), or "" when it can. Checked before anything is
// trained: SQLite would open such a file read-only without a word and
// fail at the first write.
std::string unwritable_reason(const std::string& path) {
  const auto who = [](uid_t uid) {
    passwd entry{};
    passwd* pw = nullptr;
    char buf[1024];
    const bool named = ::getpwuid_r(uid, &entry, buf, sizeof buf, &pw) == 0 && pw != nullptr;
    return (named ? std::string(pw->pw_name) + " " : std::string()) + "(uid " +
           std::to_string(uid) + ")";
  };
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  std::string what, checked;
  int err = 0;
  const auto unwritable = [&err](const std::string& p, int mode) {
    // AT_EACCESS: as this process's effective user, whom the message names.
    if (::access(p.c_str(), F_OK) != 0 || ::faccessat(AT_FDCWD, p.c_str(), mode, AT_EACCESS) == 0) {
      return false;
    }
    err = errno;
    return true;
  };
  if (unwritable(path, W_OK)) {
    what = "the file";
    checked = path;
  } else if (unwritable(dir, W_OK | X_OK) &&
             // (journal files already there and writable need no new file)
             !(::faccessat(AT_FDCWD, (path + "-wal").c_str(), W_OK, AT_EACCESS) == 0 &&
               ::faccessat(AT_FDCWD, (path + "-shm").c_str(), W_OK, AT_EACCESS) == 0)) {
    what = "its folder " + dir + " (where the journal goes)";
    checked = dir;
  } else {
    return "";
  }
  if (err == EROFS) return what + " is on a read-only file system";
  std::string why = what + " is not writable by this user, " + who(::geteuid());
  struct stat st {};
  if (::stat(checked.c_str(), &st) == 0 && st.st_uid != ::geteuid()) {
    why += "; it belongs to " + who(st.st_uid);
  }
  return why;
}

// Checks an existing file without writing to it: a read-only connection,
// and before that the 16-byte SQLite header, so that a text file or an
// image is reported as such rather than as a SQLite error.
// Returns true when the file is empty (a new database may be made in it).
bool check_existing_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw InputError(path + ": cannot read (" + ec.message() + ")");
  if (size == 0) return true;
  char header[16] = {};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(header, sizeof header);
    if (!in || std::memcmp(header, "SQLite format 3", 16) != 0) {
      throw InputError(path +
                       ": not a Baton history database (not an SQLite file); it was not modified");
    }
  }
  int64_t app = 0, version = 0, objects = 0;
  try {
    Db ro(path, SQLITE_OPEN_READONLY);
    // A writer's commit holds the file for milliseconds: wait, as every
    // other connection does, rather than call a busy file unreadable.
    sqlite3_busy_timeout(ro.get(), 10000);
    app = ro.scalar_int("PRAGMA application_id");
    version = ro.scalar_int("PRAGMA user_version");
    objects = ro.scalar_int("SELECT count(*) FROM sqlite_schema");
  } catch (const RuntimeError& e) {
    throw InputError(std::string(e.what()) + " (not a readable Baton history database)");
  }
  if (app == 0 && objects == 0) return true;  // an empty SQLite database
  if (app != kApplicationId) {
    throw InputError(path + ": an SQLite database, but not a Baton run history (application_id " +
                     hex32(app) + ", expected " + hex32(kApplicationId) + "); it was not modified");
  }
  if (version > kSchemaVersion) {
    throw InputError(path + ": written by a newer Baton (history schema version " +
                     std::to_string(version) + "; this build reads versions up to " +
                     std::to_string(kSchemaVersion) + "); it was not modified");
  }
  return false;
}

}  // namespace

const char* network_filesystem_name(int64_t f_type) {
  switch (static_cast<uint32_t>(f_type)) {
    case 0x6969u:
      return "NFS";
    case 0x517Bu:
      return "SMB";
    case 0xFF534D42u:
      return "CIFS";
    case 0xFE534D42u:
      return "SMB2";
    case 0x01021997u:
      return "9P";
    case 0x5346414Fu:
      return "AFS";
    case 0x73757245u:
      return "Coda";
    case 0x00C36400u:
      return "CephFS";
    case 0x0BD00BD0u:
      return "Lustre";
    case 0x47504653u:
      return "GPFS";
    case 0x65735546u:
      return "a FUSE file system (sshfs and others)";
    default:
      return nullptr;
  }
}

std::string network_filesystem_of(const std::string& path) {
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  struct statfs st {};
  if (::statfs(folder.c_str(), &st) != 0) return "";
  const char* name = network_filesystem_name(static_cast<int64_t>(st.f_type));
  return name == nullptr ? "" : name;
}

namespace {

// WAL, or a rollback journal on a network file system, where WAL's shared
// memory index is not shared between hosts (SQLite: "WAL does not work over
// a network filesystem"). `where` is the file whose folder decides.
void set_journal_mode(const Db& db, const std::string& where) {
  const std::string remote = network_filesystem_of(where);
  const char* want = remote.empty() ? "wal" : "delete";
  Stmt st(db, remote.empty() ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode = DELETE");
  if (!st.step() || st.col_text(0) != want) {
    db.fail(std::string("cannot switch to ") +
            (remote.empty() ? "WAL mode" : "a rollback journal") +
            (remote.empty() ? "" : " (the file is on " + remote + ", where WAL does not work)"));
  }
}

// A new database is made whole in a file of its own beside `path` and
// linked into place, so that no other opener (the studio's history list
// and a run's recorder start together) ever sees it half made. When
// another process or thread got there first, its database is the one
// used. Where the file system has no hard links, the database is made in
// place (a reader that comes in between is told it is not made yet).
void create_database(const std::string& path) {
  const std::string tmp = path + ".new-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::error_code ec;
  fs::remove(tmp, ec);
  struct RemoveTmp {
    const std::string& tmp;
    ~RemoveTmp() {
      std::error_code ignored;
      fs::remove(tmp, ignored);
    }
  } remove_tmp{tmp};
  {
    Db db(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // Large pages: the samples are written and read in long runs, and
    // every page is one write() on commit and checkpoint; 4 KiB pages made
    // the writer spend most of its time in system calls.
    db.exec("PRAGMA page_size = 32768");
    migrate(db, kSchemaVersion);
    set_journal_mode(db, path);
  }
  if (::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST) return;
  const int err = errno;
  if (err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == EXDEV || err == ENOSYS) {
    return;  // no hard links here: made in place by the caller
  }
  throw RuntimeError(path + ": cannot create the history database (" + std::strerror(err) + ")");
}

}  // namespace

Db open_history_db(const std::string& path, OpenMode mode) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (mode != OpenMode::kCreate) throw InputError(path + ": no such history database");
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) {
      fs::create_directories(parent, ec);
      if (ec) {
        throw RuntimeError(parent.string() + ": cannot create the directory (" + ec.message() +
                           ")");
      }
    }
    create_database(path);
  }
  if (fs::exists(path, ec)) {
    if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, not a database");
    // For writing, first whether it can be written at all (on a read-only
    // file system SQLite cannot even read a WAL database).
    if (mode != OpenMode::kReadOnly) {
      if (const std::string why = unwritable_reason(path); !why.empty()) {
        throw InputError(path + ": cannot record in this history database: " + why +
                         " (record elsewhere: baton train --db PATH, or --no-db)");
      }
    }
    check_existing_file(path);
  }
  if (mode == OpenMode::kReadOnly) {
    Db ro(path, SQLITE_OPEN_READONLY);
    sqlite3_busy_timeout(ro.get(), 10000);
    const int64_t version = ro.scalar_int("PRAGMA user_version");
    if (version == 0) {
      throw InputError(path +
                       ": an empty database: no history has been made in it yet (a run "
                       "recorded in it makes one)");
    }
    if (version < kOldestReadableSchema) {
      throw InputError(path + ": history schema version " + std::to_string(version) +
                       " is older than this build reads without upgrading it; it is upgraded "
                       "(after a backup copy) the next time it is written: a run recorded in "
                       "it, or `baton history tag`, `note` or `delete`");
    }
    return ro;
  }
  Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  // Readers and the writer of other processes wait this long for a lock
  // (the writer holds it for one batch: milliseconds).
  sqlite3_busy_timeout(db.get(), 10000);
  db.exec("PRAGMA foreign_keys = ON");
  // Statement journals and sorters in memory: on disk, every statement of
  // the writer's batches spilled its journal to a temporary file, millions
  // of write() calls for a long run.
  db.exec("PRAGMA temp_store = MEMORY");
  if (db.scalar_int("PRAGMA user_version") == 0 &&
      db.scalar_int("SELECT count(*) FROM sqlite_schema") == 0) {
    // A new database. Large pages: the samples are written and read in long
    // runs, and every page is one write() on commit and checkpoint; 4 KiB
    // pages made the writer spend most of its time in system calls.
    db.exec("PRAGMA page_size = 32768");
  }
  if (const int64_t version = db.scalar_int("PRAGMA user_version"); version < kSchemaVersion) {
    if (version > 0) back_up(db, path + ".schema-v" + std::to_string(version) + ".bak");
    migrate(db, kSchemaVersion);
  }
  set_journal_mode(db, path);
  db.exec("PRAGMA synchronous = NORMAL");
  backfill_rollups(db);
  mark_dead_runs_interrupted(db);
  finish_interrupted_deletes(db);
  return db;
}

// ------------------------------------------------- the interrupted rule alone

int mark_dead_runs_interrupted_in(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, not a database");
  // A history this user cannot write: the rule is shown by readers, not stored.
  if (!unwritable_reason(path).empty()) return 0;
  check_existing_file(path);
  Db db(path, SQLITE_OPEN_READWRITE);
  sqlite3_busy_timeout(db.get(), 10000);
  if (db.scalar_int("PRAGMA user_version") != kSchemaVersion) return 0;
  return mark_dead_runs_interrupted(db);
}

}  // namespace baton::history_detail
