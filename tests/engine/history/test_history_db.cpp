// White-box test of the history's SQLite layer (engine/src/history/db.h,
// listed in test_include_order.cpp): a bind that SQLite refuses is an error
// naming the statement, not a NULL stored in silence.
#include <baton/core/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "history/db.h"

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

}  // namespace
}  // namespace baton::history_detail
