// Where an elastic job's newest checkpoint is, and where its next attempt's
// chief goes because of it. The chief alone writes checkpoints, on its own
// host; nothing says the hosts share a file system. `baton launch` reads the
// chief's `checkpoint` events (the step and the file's path), so it knows
// the host and step of the newest one, and before each attempt it decides:
//  - the chief goes on a usable host that holds that checkpoint (the first
//    in list order: that host is moved to the front of the placement, since
//    rank 0 takes the first slot);
//  - or, no such host being usable (it left the list, cools down after a
//    failure, or a new host is listed before it), the checkpoint is carried
//    to the chief's new host (checkpoint_carry.h) before the attempt starts;
//  - and when the carry fails, the attempt is not started: the job fails
//    with that reason rather than train again from an older step.
// The attempt's chief is then told the step it must resume at (`baton train
// --resume-step-at-least`) and refuses to start from an earlier one.
#pragma once

#include <baton/cluster/cluster_spec.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace baton {

// The newest checkpoint an attempt's chief reported.
struct CheckpointSite {
  int64_t step = -1;               // -1: none yet
  std::string path;                // the file, the same path on every host
  std::vector<std::string> hosts;  // the hosts that hold it (written, or carried to)
  bool known() const { return step >= 0 && !hosts.empty(); }
};

// A chief's `checkpoint` event line: its step and file. nullopt for any
// other line, or one without a step >= 0 and a non-empty path (rank
// output is others' input: nothing here throws).
struct CheckpointReport {
  int64_t step = -1;
  std::string path;
};
std::optional<CheckpointReport> parse_checkpoint_event(const std::string& line);

// `site` after the chief on `host` reported `report`: a newer step replaces
// it (held by `host` alone); the same step adds the host.
void note_checkpoint(CheckpointSite& site, const CheckpointReport& report, const std::string& host);

struct ChiefPlacement {
  // The usable hosts in the order to place ranks on them: the chief's
  // host first when it holds the checkpoint, otherwise as given.
  std::vector<HostfileEntry> hosts;
  // "" when the chief's host holds the checkpoint (or none is known);
  // otherwise the host to carry it from (the first that holds it).
  std::string carry_from;
  // Why it must be carried: "host X (which holds the checkpoint at step N)
  // is not usable now".
  std::string why;
};

// Where the next attempt's chief goes, given the usable hosts in list
// order (HostPool::usable) and the newest checkpoint's site.
ChiefPlacement place_chief(const std::vector<HostfileEntry>& usable, const CheckpointSite& site);

}  // namespace baton
