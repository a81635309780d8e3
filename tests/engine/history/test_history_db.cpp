// White-box test of the history's SQLite layer (engine/src/history/db.h,
// listed in test_include_order.cpp): a bind that SQLite refuses is an error
// naming the statement, not a NULL stored in silence; reading commands open
// read-only and never write the file (no migration, no interrupted rule),
// even of the version 2 layout earlier releases wrote.
#include <baton/core/error.h>
#include <baton/history/replay.h>
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "history/db.h"
#include "history_test_util.h"

namespace baton::history_detail {
namespace {

TEST(HistoryDb, ARefusedBindIsAnErrorNamingTheStatement) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("baton_db_bind_" + std::to_string(::getpid()) + ".db"))
                               .string();
  std::filesystem::remove(path);
  {
    Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    Stmt st(db, "SELECT ?1");
    EXPECT_NO_THROW(st.bind(1, int64_t{7}));
    for (int bad : {0, 2}) {
      try {
        st.bind(bad, int64_t{7});
        ADD_FAILURE() << "bind index " << bad << " accepted";
      } catch (const RuntimeError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(path), std::string::npos) << what;
        EXPECT_NE(what.find("cannot bind parameter " + std::to_string(bad) + " of \"SELECT ?1\""),
                  std::string::npos)
            << what;
      }
    }
    EXPECT_THROW(st.bind(3, 1.5), RuntimeError);
    EXPECT_THROW(st.bind(3, "text"), RuntimeError);
    EXPECT_THROW(st.bind_null(3), RuntimeError);
  }
  std::filesystem::remove(path);
}

// A version 2 file (the schema of the last release: no link wait_s) with a
// run whose recorder is gone (pid 1's start time is not "0/0").
std::string make_v2_history(const history_test::TempDir& tmp) {
  const std::string path = tmp.path("v2.db");
  {
    Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode = WAL");
    migrate(db, 2);
    const std::string rows =
        "INSERT INTO runs (id, uid, name, status, start_time, owner_host, owner_pid, owner_start) "
        "VALUES (1, 'old', 'old', 'running', 1000, '" +
        this_process().host +
        "', 1, '0/0');"
        "INSERT INTO metrics (id, name, kind) VALUES (1, 'loss', 'step');"
        "INSERT INTO metric_samples VALUES (1, 1, 5, 0, 1, 0, 0.5, 0.25);"
        "INSERT INTO link_samples VALUES (1, 5, 2, 0, 1, 0.5, 4096, 0.001, 0);";
    db.exec(rows.c_str());
  }
  return path;
}

TEST(HistoryDb, ReadingNeverWritesTheFile) {
  history_test::TempDir tmp;
  const std::string path = make_v2_history(tmp);
  const std::string before = history_test::read_file(path);
  {
    HistoryStore store(path, HistoryStore::Open::kReadOnly);
    EXPECT_EQ(store.schema_version(), 2);
    const auto runs = store.list_runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "interrupted") << "a dead recorder's run reads as interrupted";
    const auto links = store.links(1);
    ASSERT_EQ(links.size(), 1u);
    EXPECT_EQ(links[0].num_bytes, 4096);
    EXPECT_DOUBLE_EQ(links[0].wait_s, 0.0);             // version 2 kept none
    EXPECT_THROW(store.add_tag(1, "x"), RuntimeError);  // a reader does not write
    HistoryReplay replay(path, "old");
    int n = 0;
    while (replay.next()) ++n;
    EXPECT_GT(n, 1);
  }
  EXPECT_EQ(history_test::read_file(path), before) << "a read changed the file";
  EXPECT_EQ(history_test::pragma(path, "user_version"), "2");
  EXPECT_EQ(history_test::query_text(path, "SELECT status FROM runs WHERE id = 1"), "running");
  EXPECT_FALSE(std::filesystem::exists(path + ".schema-v2.bak"));
}

// A writer migrates, after a backup copy of the file as it was.
TEST(HistoryDb, AWriterMigratesAfterABackupCopy) {
  history_test::TempDir tmp;
  const std::string path = make_v2_history(tmp);
  { const HistoryStore store(path, HistoryStore::Open::kExisting); }
  EXPECT_EQ(history_test::pragma(path, "user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(history_test::query_text(path, "SELECT status FROM runs WHERE id = 1"), "interrupted");
  const std::string backup = path + ".schema-v2.bak";
  ASSERT_TRUE(std::filesystem::exists(backup));
  EXPECT_EQ(history_test::pragma(backup, "user_version"), "2");
  EXPECT_EQ(history_test::query_text(backup, "SELECT status FROM runs WHERE id = 1"), "running");
  EXPECT_EQ(history_test::count(backup, "SELECT count(*) FROM link_samples"), 1);
}

// WAL on a network file system is refused by design: a rollback journal
// there. The kinds are recognised by statfs's f_type; the test machine's
// own folders are local and keep WAL.
TEST(HistoryDb, NetworkFileSystemsGetARollbackJournal) {
  EXPECT_STREQ(network_filesystem_name(0x6969), "NFS");
  EXPECT_STREQ(network_filesystem_name(0xFF534D42), "CIFS");
  EXPECT_STREQ(network_filesystem_name(0xFE534D42), "SMB2");
  EXPECT_STREQ(network_filesystem_name(0x01021997), "9P");
  EXPECT_EQ(network_filesystem_name(0xEF53), nullptr);      // ext4
  EXPECT_EQ(network_filesystem_name(0x01021994), nullptr);  // tmpfs
  history_test::TempDir tmp;
  const std::string path = tmp.path("local.db");
  ASSERT_EQ(network_filesystem_of(path), "") << "the test's temporary folder is not local";
  { const HistoryStore store(path); }
  EXPECT_EQ(history_test::pragma(path, "journal_mode"), "wal");
}

// The version 2 rollups of old runs are computed after the migration, a
// run a transaction, and a backfill cut short is finished by the next
// writer's open (it used to be one transaction over every sample).
TEST(HistoryDb, RollupsOfOldRunsAreBackfilledRunByRun) {
  history_test::TempDir tmp;
  const std::string path = tmp.path("v1.db");
  {
    Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    migrate(db, 1);
    db.exec(
        "INSERT INTO runs (id, uid, name, status, start_time) VALUES (1, 'a', 'a', 'completed', "
        "1), (2, 'b', 'b', 'completed', 2);"
        "INSERT INTO metrics (id, name, kind) VALUES (1, 'loss', 'step');"
        "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 999) "
        "INSERT INTO metric_samples SELECT 1 + i % 2, 1, i, 0, i, 0, i * 0.01, i FROM c;");
    migrate(db, 2);  // the schema; the rollups wait in rollup_backfill
    EXPECT_EQ(db.scalar_int("SELECT count(*) FROM rollup_backfill"), 2);
    EXPECT_EQ(db.scalar_int("SELECT count(*) FROM metric_rollups"), 0);
  }
  {
    const HistoryStore store(path);  // a writer's open: migrates on, backfills
    for (int64_t run : {1, 2}) {
      const auto summary = store.metric_summary(run);
      ASSERT_EQ(summary.size(), 1u) << "run " << run;
      EXPECT_EQ(summary[0].count, 500);
      EXPECT_DOUBLE_EQ(summary[0].max, run == 1 ? 998.0 : 999.0);
      EXPECT_DOUBLE_EQ(summary[0].last, run == 1 ? 998.0 : 999.0);
    }
  }
  EXPECT_EQ(history_test::query_text(
                path, "SELECT count(*) FROM sqlite_schema WHERE name = 'rollup_backfill'"),
            "0");
}

TEST(HistoryDb, AVersion1FileIsNotReadWithoutUpgrading) {
  history_test::TempDir tmp;
  const std::string path = tmp.path("v1.db");
  {
    Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    migrate(db, 1);
  }
  const std::string before = history_test::read_file(path);
  try {
    const HistoryStore store(path, HistoryStore::Open::kReadOnly);
    ADD_FAILURE() << "a version 1 file was read";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("upgraded (after a backup copy) the next time it is written"),
        std::string::npos)
        << e.what();
  }
  EXPECT_EQ(history_test::read_file(path), before);
}

// The interrupted rule's check and its update are one write transaction:
// a run that a new owner claims (a resumed attempt's chief) after the
// rule's first look at the table is seen with its new owner, and left
// running - not marked interrupted under the process that just took it.
TEST(HistoryDb, TheInterruptedRuleLeavesARunClaimedAfterItsFirstLook) {
  history_test::TempDir tmp;
  const std::string path = tmp.path("claimed.db");
  { const HistoryStore create(path); }
  const std::string dead_owner = "INSERT INTO runs (id, uid, name, status, start_time, owner_host, "
                                 "owner_pid, owner_start) VALUES (1, 'r', 'r', 'running', 1000, '" +
                                 this_process().host + "', 1, '0/0')";
  history_test::exec_sql(path, dead_owner);
  const ProcessIdentity me = this_process();
  Db db(path, SQLITE_OPEN_READWRITE);
  sqlite3_busy_timeout(db.get(), 10000);
  bool looked = false;
  const int marked = mark_dead_runs_interrupted(db, [&] {
    looked = true;
    // Another process's writer takes the run now.
    history_test::exec_sql(path, "UPDATE runs SET owner_pid = " + std::to_string(me.pid) +
                                     ", owner_start = '" + me.start + "' WHERE id = 1");
  });
  EXPECT_TRUE(looked) << "the first look found no dead owner";
  EXPECT_EQ(marked, 0);
  EXPECT_EQ(history_test::query_text(path, "SELECT status FROM runs WHERE id = 1"), "running");
  EXPECT_EQ(history_test::count(path, "SELECT count(*) FROM events WHERE run = 1"), 0);
  // And a run whose owner is still gone is marked, once, with its event.
  history_test::exec_sql(path, "UPDATE runs SET owner_pid = 1, owner_start = '0/0' WHERE id = 1");
  EXPECT_EQ(mark_dead_runs_interrupted(db), 1);
  EXPECT_EQ(history_test::query_text(path, "SELECT status FROM runs WHERE id = 1"), "interrupted");
  EXPECT_EQ(history_test::count(path, "SELECT count(*) FROM events WHERE run = 1"), 1);
}

// A run's owner may be another process than its recorder (the launcher,
// under `baton launch`): the row names it, and the run stays running while
// it lives, whatever became of the recorder.
TEST(HistoryDb, ARunOwnedByAnotherLiveProcessStaysRunning) {
  history_test::TempDir tmp;
  const std::string path = tmp.path("owned.db");
  const ProcessIdentity me = this_process();
  // The recorder: a child process that records the run's start, naming this
  // process its owner, and exits without the run's end (as a killed chief).
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      HistorySinkOptions opt;
      opt.owner = me;
      HistorySink sink(path, {}, opt);
      RunStartEvent start;
      start.run = "owned";
      start.name = "owned";
      sink.emit(start);
      sink.close();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(history_test::query_text(path, "SELECT owner_pid FROM runs"), std::to_string(me.pid));
  EXPECT_EQ(history_test::query_text(path, "SELECT owner_start FROM runs"), me.start);
  { const HistoryStore reopen(path, HistoryStore::Open::kExisting); }
  EXPECT_EQ(history_test::query_text(path, "SELECT status FROM runs"), "running");
  EXPECT_EQ(history_test::count(path, "SELECT count(*) FROM events"), 0);
}

TEST(HistoryDb, AProcessIdentityRoundTripsAndRejectsBadText) {
  const ProcessIdentity me = this_process();
  EXPECT_TRUE(process_alive(me.pid, me.start));
  EXPECT_FALSE(process_alive(me.pid, me.start + "1")) << "another start time is another process";
  const ProcessIdentity back = ProcessIdentity::parse(me.text(), "--owner");
  EXPECT_EQ(back.host, me.host);
  EXPECT_EQ(back.pid, me.pid);
  EXPECT_EQ(back.start, me.start);
  for (const char* bad : {"", "host", "host:12", "host::1/2", ":12:1/2", "host:x:1/2", "host:12:"}) {
    try {
      ProcessIdentity::parse(bad, "--owner");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--owner"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace baton::history_detail
