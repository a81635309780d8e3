#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/train/run_dir.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace baton {
namespace fs = std::filesystem;

std::string default_runs_root() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/baton/runs";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/baton/runs";
}

std::string make_run_id(const std::string& name) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  const uint64_t salt = Rng::derive(static_cast<uint64_t>(now.time_since_epoch().count()),
                                    static_cast<uint64_t>(::getpid()));
  char hex[8];
  std::snprintf(hex, sizeof(hex), "%04x", static_cast<unsigned>(salt & 0xffff));
  return name + "-" + stamp + "-" + hex;
}

RunDir create_run_dir(const std::string& root, const std::string& id) {
  RunDir d{id, (fs::path(root) / id).string()};
  std::error_code ec;
  fs::create_directories(d.path, ec);
  if (ec) throw RuntimeError("cannot create the run directory " + d.path + ": " + ec.message());
  return d;
}

std::optional<RunDir> find_resumable_run(const std::string& root, const std::string& name) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  std::optional<RunDir> best;
  const std::string prefix = name + "-";
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string id = e.path().filename().string();
    // Ids sort by time: the newest has the greatest name.
    if (id.rfind(prefix, 0) != 0 || (best && id <= best->id)) continue;
    bool has_ckpt = false;
    for (const auto& f : fs::directory_iterator(e.path() / "checkpoints", ec)) {
      const std::string fn = f.path().filename().string();
      if (fn.rfind("ckpt-", 0) == 0) has_ckpt = true;
    }
    if (has_ckpt) best = RunDir{id, e.path().string()};
  }
  return best;
}

}  // namespace baton
