// Timelines: every process's spans gathered into one record (the compact
// form a "timeline" telemetry event carries and the history keeps), and
// that record turned into a Chrome trace (the JSON Trace Event Format that
// Perfetto and chrome://tracing open).
//
// The compact form, version 1:
//   {"version": 1, "base_unix_s": <the Unix time of the chief's zero>,
//    "clock": "<how the processes' clocks were aligned>",
//    "ranks": [{"rank": R, "host": "...", "offset_ns": <this process's
//               clock to the chief's>, "round_trip_ns": <the best ping's>,
//               "dropped": <spans that did not fit>,
//               "names": [["forward", "compute"], ...],   // name, category
//               "spans": [[name index, lane, step, start_ns, duration_ns,
//                          num_bytes, index], ...]}]}
// start_ns is on the chief's clock (ns since its zero). Lanes are
// core/timeline.h's TimelineLane values.
#pragma once

#include <baton/core/timeline.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

// One process's part of the record: its spans moved onto the chief's clock
// by offset_ns.
nlohmann::json timeline_part(const Timeline& timeline, int rank, const std::string& host,
                             int64_t offset_ns, int64_t round_trip_ns);

// The record of a run from every process's part (in any order), on the
// chief's clock whose zero is at base_unix_s.
nlohmann::json timeline_record(std::vector<nlohmann::json> parts, double base_unix_s,
                               const std::string& clock);

// The Chrome trace of a record: a process per rank ("rank R (host)"), a
// thread per lane (step loop, replica i, replica i allreduce), a complete
// ("X") event per span with its step, bytes and bucket in args. Throws
// RuntimeError naming the field when the record is malformed (it may come
// from a file or a history database).
nlohmann::json chrome_trace(const nlohmann::json& record);

// The name Chrome shows for a lane.
std::string timeline_lane_name(int32_t lane);

}  // namespace baton
