// The engine's house rules, read from the #include lines of the tree:
//  - every engine file lives in a part's folder (engine/src/<part>/,
//    engine/include/baton/<part>/) and includes only the parts below it:
//    core <- nn, optim, data, cluster (<- discovery) <- comm <- strategy <- train
//    <- launch; telemetry and history sit beside train (on core; history
//    records telemetry). The table is kAllowed below.
//  - no Qt header anywhere in engine/;
//  - engine/src is private: ui/, app/, plugins/ and tests/ include only
//    <baton/...>, except the white-box tests named in kWhiteBoxTests;
//  - the ui target does not get the repository root as an include path.
// The checks are functions over (path, text), so the first tests below
// feed them lines that break each rule and expect a complaint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::map<std::string, std::set<std::string>>& allowed_parts() {
  static const std::map<std::string, std::set<std::string>> kAllowed = {
      {"core", {}},
      {"nn", {"core"}},
      {"optim", {"core", "nn"}},  // the optimizer updates nn's parameters
      {"data", {"core"}},
      {"cluster", {"core"}},
      {"discovery", {"core", "cluster"}},  // remote probes take the cluster's host names
      {"comm", {"core", "nn", "optim", "data", "cluster", "discovery"}},
      {"strategy", {"core", "nn", "optim", "data", "cluster", "discovery", "comm"}},
      {"telemetry", {"core"}},
      {"history", {"core", "telemetry"}},
      {"train",
       {"core", "nn", "optim", "data", "cluster", "discovery", "comm", "strategy", "telemetry"}},
      {"launch",
       {"core", "nn", "optim", "data", "cluster", "discovery", "comm", "strategy", "telemetry",
        "train", "history"}},
  };
  return kAllowed;
}

// Tests that test private engine classes and may include engine/src headers.
const std::set<std::string> kWhiteBoxTests = {
    "tests/engine/strategy/test_gradient_reducer.cpp",
    "tests/engine/strategy/test_ps_tcp_server.cpp",
    "tests/engine/strategy/ps_test_server.h",  // that test's server and peer
    "tests/fuzz/fuzz_ps_wire.cpp",  // the servers' reader is private to the engine
    "tests/engine/history/test_history_db.cpp",
    "tests/engine/nn/test_fast_math.cpp",
    "tests/engine/nn/test_cpu_parallel.cpp",
};

// Quoted headers an engine source may include that are not beside it:
// the generated build info, and the C interface of baton_cuda.so's NCCL
// side (plain C, no CUDA header).
const std::set<std::string> kEngineQuotedExternal = {"baton_build_info.h", "nccl_abi.h"};

struct Include {
  int line = 0;
  bool angled = false;
  std::string path;
};

std::vector<Include> includes_of(const std::string& text) {
  static const std::regex re(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out.push_back({n, m[1] == "<", m[2]});
  }
  return out;
}

bool is_qt_header(const std::string& path) {
  static const std::regex re(R"(^(Q[A-Z]\w*|Qt\w*/.*|qcustomplot\.h)$)");
  return std::regex_match(path, re);
}

std::string where(const std::string& rel, const Include& inc) {
  return rel + ":" + std::to_string(inc.line) + ": #include " + (inc.angled ? "<" : "\"") +
         inc.path + (inc.angled ? ">" : "\"");
}

// The part of an engine file from its path relative to the repository
// ("engine/src/comm/ring.cpp" -> "comm"); "" when it is in no part folder.
std::string part_of(const std::string& rel) {
  for (const std::string prefix : {"engine/src/", "engine/include/baton/"}) {
    if (rel.rfind(prefix, 0) != 0) continue;
    const std::string rest = rel.substr(prefix.size());
    const size_t slash = rest.find('/');
    return slash == std::string::npos ? std::string() : rest.substr(0, slash);
  }
  return {};
}

// Violations of an engine file (engine/src or engine/include/baton).
// `beside`: whether a quoted header exists in the file's own folder.
std::vector<std::string> check_engine_file(const std::string& rel, const std::string& text,
                                           const std::function<bool(const std::string&)>& beside) {
  std::vector<std::string> bad;
  const std::string part = part_of(rel);
  const auto& table = allowed_parts();
  const auto self = table.find(part);
  if (self == table.end()) {
    bad.push_back(rel +
                  ": not in a part's folder (one of engine/src/<part>/, "
                  "engine/include/baton/<part>/ with a part of the table)");
    return bad;
  }
  const bool is_public = rel.rfind("engine/include/", 0) == 0;
  for (const Include& inc : includes_of(text)) {
    if (is_qt_header(inc.path)) {
      bad.push_back(where(rel, inc) + ": a Qt header in the engine");
      continue;
    }
    if (inc.angled && inc.path.rfind("baton/", 0) == 0) {
      const std::string rest = inc.path.substr(6);
      const size_t slash = rest.find('/');
      const std::string to = slash == std::string::npos ? std::string() : rest.substr(0, slash);
      if (to != part && self->second.count(to) == 0) {
        bad.push_back(where(rel, inc) + ": part \"" + part + "\" may not include part \"" +
                      (to.empty() ? rest : to) + "\"");
      }
      continue;
    }
    if (!inc.angled) {
      if (is_public) {
        bad.push_back(where(rel, inc) + ": a public header includes a private one");
      } else if (kEngineQuotedExternal.count(inc.path) == 0 && !beside(inc.path)) {
        bad.push_back(where(rel, inc) + ": a private header from another folder");
      }
    }
  }
  return bad;
}

// Violations of a file outside the engine (ui/, app/, plugins/, tests/).
std::vector<std::string> check_client_file(const std::string& rel, const std::string& text,
                                           const std::set<std::string>& private_headers) {
  std::vector<std::string> bad;
  if (kWhiteBoxTests.count(rel) != 0) return bad;
  std::set<std::string> private_names;
  for (const std::string& p : private_headers) private_names.insert(fs::path(p).filename());
  for (const Include& inc : includes_of(text)) {
    const bool reaches_src =
        inc.path.find("engine/src") != std::string::npos || private_headers.count(inc.path) != 0 ||
        (!inc.angled && private_names.count(fs::path(inc.path).filename()) != 0);
    if (reaches_src) {
      bad.push_back(where(rel, inc) +
                    ": engine/src is private (use <baton/...>, or list a "
                    "white-box test in kWhiteBoxTests)");
    }
    if (!inc.angled && (inc.path.rfind("ui/", 0) == 0 || inc.path.rfind("engine/", 0) == 0)) {
      bad.push_back(where(rel, inc) + ": a path from the repository root");
    }
  }
  return bad;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const fs::path kRoot = BATON_SOURCE_DIR;

bool is_code(const fs::path& p) {
  const std::string e = p.extension().string();
  return e == ".h" || e == ".cpp" || e == ".cu" || e == ".cuh" || e == ".in" || e == ".hpp";
}

std::vector<fs::path> code_under(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
    if (e.is_regular_file() && is_code(e.path())) out.push_back(e.path());
  }
  return out;
}

std::string rel_of(const fs::path& p) { return fs::relative(p, kRoot).generic_string(); }

std::set<std::string> private_engine_headers() {
  std::set<std::string> out;
  for (const fs::path& p : code_under("engine/src")) {
    if (p.extension() == ".h") out.insert(fs::relative(p, kRoot / "engine/src").generic_string());
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

auto nothing_beside = [](const std::string&) { return false; };

// ---- the checks can fail ----------------------------------------------------

TEST(IncludeOrder, AnUpwardIncludeIsRefused) {
  const auto bad = check_engine_file("engine/src/comm/ring.cpp",
                                     "#include <baton/comm/communicator.h>\n"
                                     "#include <baton/strategy/strategy.h>\n",
                                     nothing_beside);
  ASSERT_EQ(bad.size(), 1u) << join(bad);
  EXPECT_NE(bad[0].find("ring.cpp:2"), std::string::npos) << bad[0];
  EXPECT_NE(bad[0].find("\"strategy\""), std::string::npos) << bad[0];
}

TEST(IncludeOrder, SidewaysIncludesFollowTheTable) {
  // history records telemetry, but train does not write the history.
  EXPECT_TRUE(check_engine_file("engine/src/history/sink.cpp",
                                "#include <baton/telemetry/telemetry.h>\n", nothing_beside)
                  .empty());
  EXPECT_EQ(check_engine_file("engine/include/baton/train/trainer.h",
                              "#include <baton/history/store.h>\n", nothing_beside)
                .size(),
            1u);
  EXPECT_EQ(check_engine_file("engine/src/nn/model.cpp", "#include <baton/optim/optimizer.h>\n",
                              nothing_beside)
                .size(),
            1u);
}

TEST(IncludeOrder, AQtHeaderInTheEngineIsRefused) {
  for (const char* h :
       {"#include <QObject>\n", "#include <QtCore/qglobal.h>\n", "#include <qcustomplot.h>\n"}) {
    const auto bad = check_engine_file("engine/src/telemetry/telemetry.cpp", h, nothing_beside);
    ASSERT_EQ(bad.size(), 1u) << h;
    EXPECT_NE(bad[0].find("Qt header"), std::string::npos) << bad[0];
  }
}

TEST(IncludeOrder, FilesOutsideAPartFolderAreRefused) {
  EXPECT_EQ(check_engine_file("engine/src/loose.cpp", "", nothing_beside).size(), 1u);
  EXPECT_EQ(check_engine_file("engine/include/baton/loose.h", "", nothing_beside).size(), 1u);
  EXPECT_EQ(check_engine_file("engine/src/attic/old.cpp", "", nothing_beside).size(), 1u);
}

TEST(IncludeOrder, PrivateHeadersStayInTheirFolder) {
  const auto beside = [](const std::string& h) { return h == "db.h"; };
  EXPECT_TRUE(
      check_engine_file("engine/src/history/sink.cpp", "#include \"db.h\"\n", beside).empty());
  EXPECT_EQ(check_engine_file("engine/src/train/trainer.cpp",
                              "#include \"../strategy/gradient_buckets.h\"\n", nothing_beside)
                .size(),
            1u);
  EXPECT_EQ(check_engine_file("engine/include/baton/history/store.h", "#include \"db.h\"\n", beside)
                .size(),
            1u);
}

TEST(IncludeOrder, ClientsDoNotReachIntoEngineSrc) {
  const std::set<std::string> priv = {"strategy/gradient_buckets.h", "history/db.h"};
  EXPECT_EQ(
      check_client_file("ui/train/run_form.cpp", "#include \"strategy/gradient_buckets.h\"\n", priv)
          .size(),
      1u);
  EXPECT_EQ(check_client_file("app/train_command.cpp", "#include \"db.h\"\n", priv).size(), 1u);
  EXPECT_EQ(check_client_file("tests/engine/x/test_x.cpp",
                              "#include \"../../engine/src/core/x.h\"\n", priv)
                .size(),
            1u);
  EXPECT_EQ(
      check_client_file("ui/common/main_window.cpp", "#include \"ui/dashboard.h\"\n", priv).size(),
      1u);
  // The white-box test named in the list may.
  EXPECT_TRUE(check_client_file("tests/engine/strategy/test_gradient_reducer.cpp",
                                "#include \"strategy/gradient_buckets.h\"\n", priv)
                  .empty());
  EXPECT_TRUE(check_client_file(
                  "ui/train/run_form.cpp",
                  "#include <baton/train/run_config.h>\n#include \"train/run_form.h\"\n", priv)
                  .empty());
}

// ---- the tree keeps them ----------------------------------------------------

TEST(IncludeOrder, TheEngineKeepsThePartOrder) {
  std::vector<std::string> bad;
  size_t files = 0;
  for (const char* dir : {"engine/src", "engine/include"}) {
    for (const fs::path& p : code_under(dir)) {
      ++files;
      const auto beside = [&](const std::string& h) { return fs::exists(p.parent_path() / h); };
      for (auto& b : check_engine_file(rel_of(p), read_text(p), beside)) bad.push_back(b);
    }
  }
  EXPECT_GT(files, 50u) << "the engine's files were not found under " << kRoot;
  EXPECT_TRUE(bad.empty()) << join(bad);
}

// baton_cuda.so implements the op layer (issue 30: the CUDA backend is a
// DeviceBackend), so it may include the engine's public core and nn
// headers, and nothing above them: it knows nothing of training,
// strategies or the studio.
TEST(IncludeOrder, TheCudaLibraryIncludesOnlyTheOpLayer) {
  std::vector<std::string> bad;
  for (const fs::path& p : code_under("engine/cuda")) {
    for (const Include& inc : includes_of(read_text(p))) {
      const bool engine = inc.path.rfind("baton/", 0) == 0;
      const bool op_layer =
          inc.path.rfind("baton/core/", 0) == 0 || inc.path.rfind("baton/nn/", 0) == 0;
      if ((engine && !op_layer) || is_qt_header(inc.path)) bad.push_back(where(rel_of(p), inc));
    }
  }
  EXPECT_TRUE(bad.empty()) << "baton_cuda.so may use only the op layer's headers:\n" << join(bad);
}

TEST(IncludeOrder, NothingOutsideTheEngineIncludesEngineSrc) {
  const std::set<std::string> priv = private_engine_headers();
  ASSERT_FALSE(priv.empty());
  std::vector<std::string> bad;
  for (const char* dir : {"ui", "app", "plugins", "tests"}) {
    for (const fs::path& p : code_under(dir)) {
      if (rel_of(p) == "tests/engine/test_include_order.cpp") continue;  // its own examples
      for (auto& b : check_client_file(rel_of(p), read_text(p), priv)) bad.push_back(b);
    }
  }
  EXPECT_TRUE(bad.empty()) << join(bad);
}

TEST(IncludeOrder, TheUiTargetDoesNotGetTheRepositoryRoot) {
  const std::string text = read_text(kRoot / "ui/CMakeLists.txt");
  static const std::regex re(R"(target_include_directories\s*\(\s*baton_ui([^)]*)\))");
  int seen = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    ++seen;
    const std::string dirs = (*it)[1];
    for (const char* root :
         {"CMAKE_CURRENT_SOURCE_DIR}/..", "PROJECT_SOURCE_DIR}", "CMAKE_SOURCE_DIR}"}) {
      const size_t at = dirs.find(root);
      if (at == std::string::npos) continue;
      // ${PROJECT_SOURCE_DIR}/ui is fine; the bare root is not.
      const size_t after = at + std::string(root).size();
      const bool bare = after >= dirs.size() || dirs[after] != '/' ||
                        std::string(root) == "CMAKE_CURRENT_SOURCE_DIR}/..";
      EXPECT_FALSE(bare) << "ui/CMakeLists.txt gives baton_ui the repository root:" << dirs;
    }
  }
  EXPECT_GT(seen, 0) << "no target_include_directories(baton_ui ...) in ui/CMakeLists.txt";
}

}  // namespace
