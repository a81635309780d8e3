#include <baton/cluster/cluster_spec.h>
#include <baton/core/child_process.h>
#include <baton/core/running_child.h>
#include <baton/core/temp_file.h>
#include <baton/launch/checkpoint_carry.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <regex>

namespace baton {

namespace {

// On the source host: the file's SHA-256 on one line, its base64 on the next.
constexpr const char* kSend = R"sh(set -e
h=$(sha256sum < "$1")
echo "${h%% *}"
base64 -w 0 < "$1"
echo)sh";

// On the destination host: standard input decoded to a temporary file of
// its own beside the file (removed whatever happens before the rename),
// checked against the digest, flushed, renamed (atomic in one folder), and
// the folder flushed: after a crash the name holds the whole file or the
// file it had before.
constexpr const char* kReceive = R"sh(set -e
f="$1"; want="$2"; d=$(dirname "$f")
mkdir -p "$d"
t=$(mktemp "$d/.carry-XXXXXX")
trap 'rm -f "$t"' EXIT
base64 -d > "$t"
h=$(sha256sum < "$t"); got="${h%% *}"
if [ "$got" != "$want" ]; then
  echo "the copy's SHA-256 is $got, not $want" >&2; exit 1
fi
sync "$t"
mv -f "$t" "$f"
trap - EXIT
sync "$d"
echo carried)sh";

std::vector<std::string> one_rank_job(const CarryJob& job, const std::string& hostfile,
                                      const char* script) {
  return {"mpirun", "-n",      "1",  "--hostfile", hostfile, "--bind-to",
          "none",   "/bin/sh", "-c", script,       "sh",     job.path};
}

// The command's own words, without mpirun's banner about its failed rank.
std::string said(const std::string& err) {
  const std::string e = excerpt(err.substr(0, std::min(err.find("-----"), err.size())));
  return e.empty() ? std::string() : ": " + e;
}

}  // namespace

std::string carry_checkpoint(const CarryJob& job) {
  const std::string what = "copying the checkpoint " + job.path + " from host " + job.from_host +
                           " to host " + job.to_host;
  try {
    // The file's digest and text, from the host that holds it.
    const TempFile from_hosts("baton-carry-from", to_hostfile({{job.from_host, 1, 0}}));
    const ChildResult sent =
        run_child(job.mpirun, one_rank_job(job, from_hosts.path(), kSend), job.env, job.timeout_s);
    if (sent.timed_out || !exited_ok(sent.status)) {
      return what + " failed: reading it on " + job.from_host + " " +
             (sent.timed_out ? "did not finish in time"
                             : "failed (" + describe_exit(sent.status) + ")") +
             said(sent.err);
    }
    const size_t eol = sent.out.find('\n');
    const std::string digest = sent.out.substr(0, eol);
    static const std::regex hex64("[0-9a-f]{64}");
    if (eol == std::string::npos || !std::regex_match(digest, hex64)) {
      return what + " failed: " + job.from_host + " did not send the file's SHA-256" +
             said(sent.out);
    }
    std::string text = sent.out.substr(eol + 1);

    // Written on the chief's new host, under its own name once it checks.
    const TempFile to_hosts("baton-carry-to", to_hostfile({{job.to_host, 1, 0}}));
    std::vector<std::string> args = one_rank_job(job, to_hosts.path(), kReceive);
    args.push_back(digest);
    RunningChild child(job.mpirun, args, job.env, std::move(text));
    RunningChild::Lines lines;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(job.timeout_s * 1000));
    // Its output to the end, then its exit (mpirun may close both streams
    // a moment before it exits).
    while (child.read(0.2, lines) && std::chrono::steady_clock::now() < until) {
    }
    while (!child.exit_status() && std::chrono::steady_clock::now() < until) child.read(0.2, lines);
    bool done = false;
    for (const auto& l : lines.out) done = done || l == "carried";
    const std::optional<int> st = child.exit_status();
    const int status = st ? *st : child.terminate(1.0, &lines);
    std::string err;
    for (const auto& l : lines.err) err += l + "\n";
    if (!st || !exited_ok(status) || !done) {
      return what + " failed: writing it on " + job.to_host + " " +
             (!st ? "did not finish in time" : "failed (" + describe_exit(status) + ")") +
             said(err);
    }
  } catch (const std::exception& e) {
    return what + " failed: " + e.what();
  }
  return {};
}

}  // namespace baton
