#include <baton/core/error.h>
#include <baton/core/process_identity.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace baton {

namespace {

// Field 22 of /proc/<pid>/stat (start time in clock ticks after boot) and
// the state (field 3). The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
bool read_proc_stat(int64_t pid, char* state, std::string* start_ticks) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string f;
  for (int i = 3; i <= 22 && (fields >> f); ++i) {
    if (i == 3) *state = f.empty() ? '?' : f[0];
    if (i == 22) {
      *start_ticks = f;
      return true;
    }
  }
  return false;
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string line;
  std::getline(in, line);
  return line;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  return host;
}

}  // namespace

std::string ProcessIdentity::text() const { return host + ":" + std::to_string(pid) + ":" + start; }

ProcessIdentity ProcessIdentity::parse(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return InputError(what + ": \"" + text +
                      "\" is not HOST:PID:START (a host name, a process id and its "
                      "<boot id>/<start ticks>)");
  };
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (a == 0 || b == std::string::npos || b == a + 1 || b + 1 >= text.size()) throw bad();
  ProcessIdentity id;
  id.host = text.substr(0, a);
  const std::string pid = text.substr(a + 1, b - a - 1);
  if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 18) throw bad();
  id.pid = std::stoll(pid);
  id.start = text.substr(b + 1);
  if (id.pid <= 0 || id.start.find('/') == std::string::npos) throw bad();
  return id;
}

ProcessIdentity process_on_this_host(int64_t pid) {
  ProcessIdentity id;
  id.host = host_name();
  id.pid = pid;
  char state = '?';
  std::string ticks;
  if (pid > 0 && read_proc_stat(pid, &state, &ticks) && state != 'Z' && state != 'X') {
    id.start = boot_id() + "/" + ticks;
  }
  return id;
}

ProcessIdentity this_process() { return process_on_this_host(::getpid()); }

bool process_alive(int64_t pid, const std::string& start) {
  // A zombie has finished; so has a process whose pid was reused (another
  // start time) or that ran before a reboot (another boot id).
  return !start.empty() && process_on_this_host(pid).start == start;
}

}  // namespace baton
