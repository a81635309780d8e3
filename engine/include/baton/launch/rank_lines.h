// What `baton launch` reads from its ranks: mpirun's tagged output turned
// back into each rank's lines, and what a line says (a heartbeat, an
// event, or text). Ranks' output is input from other processes: nothing
// here throws on what it reads (fuzzed: tests/fuzz/fuzz_telemetry_line).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace baton {

// Reassembles the ranks' lines from mpirun --tag-output's output. mpirun
// tags each chunk it reads from a rank, not each line: a long line read in
// two chunks comes out with a second tag in its middle, and another rank's
// chunk may come in between ("[1,0]<stdout>:{\"a\":[1,1]<stdout>:beat\n
// [1,0]<stdout>:1}\n"). The newline that ends an output line ends the last
// chunk on it; every chunk before it on that line is a partial line of
// its rank, kept until that rank's line ends.
class TaggedLines {
 public:
  struct Line {
    int rank;  // -1: mpirun's own (untagged) line
    bool is_stderr;
    std::string text;
  };
  // One line of mpirun's output (without its '\n'); appends the ranks'
  // lines it completes.
  void feed(const std::string& output_line, std::vector<Line>& out);

 private:
  std::vector<std::pair<std::pair<int, bool>, std::string>> partial_;
  std::string& partial(int rank, bool err);
};

// One line a rank printed, as the launcher reads it.
struct RankLine {
  enum class Kind : int { kText = 1, kHeartbeat = 2, kEvent = 3 };
  Kind kind = Kind::kText;
  std::string type;    // an event's "type" (kHeartbeat: "heartbeat")
  int64_t pid = 0;     // a heartbeat's
  std::string host;    // a heartbeat's
  std::string start;   // a heartbeat's: its process's start (ProcessIdentity::start)
  int64_t step = -1;   // a heartbeat's, a step's or a run_end's (-1: none)
  std::string status;  // a run_end's
};

// A JSON object with a string "type" is an event (a heartbeat when the
// type says so); anything else is text. Fields of the wrong type read as
// absent.
RankLine parse_rank_line(const std::string& text);

}  // namespace baton
