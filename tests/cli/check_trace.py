"""Checks a file against the Chrome Trace Event Format (the JSON Object
Format: {"traceEvents": [...]}) as Baton writes it: every event has a name,
a phase Baton uses (X complete, M metadata), integer pid/tid, numeric
ts/dur >= 0; every process is named; complete events on one thread nest
(no two partly overlap), as the viewers need. Prints a line of figures.
usage: check_trace.py FILE PROCESSES [MIN_STEPS]"""
import json
import sys

path, processes = sys.argv[1], int(sys.argv[2])
min_steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
doc = json.load(open(path))
events = doc["traceEvents"]
assert isinstance(events, list) and events, "no traceEvents"
assert doc.get("displayTimeUnit") in ("ms", "ns"), doc.get("displayTimeUnit")
named, by_thread, steps = set(), {}, {}
for e in events:
    assert isinstance(e.get("name"), str) and e["name"], e
    assert e["ph"] in ("X", "M"), e
    assert isinstance(e["pid"], int), e
    if e["ph"] == "M":
        assert isinstance(e.get("args"), dict), e
        if e["name"] == "process_name":
            named.add(e["pid"])
        continue
    assert isinstance(e["tid"], int), e
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
    by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    if e["name"] == "step":
        steps.setdefault(e["pid"], set()).add(e["args"]["step"])
pids = {p for p, _ in by_thread}
assert len(pids) == processes, f"{len(pids)} processes with spans, expected {processes}"
assert pids <= named, f"unnamed processes {pids - named}"
eps = 0.001  # us: the ns kept as fractions
for key, spans in by_thread.items():
    spans.sort(key=lambda s: (s[0], -s[1]))
    stack = []
    for start, end, name in spans:
        while stack and stack[-1][1] <= start + eps:
            stack.pop()
        assert not stack or end <= stack[-1][1] + eps, \
            f"{key}: {name} [{start}, {end}] partly overlaps {stack[-1]}"
        stack.append((start, end, name))
for pid in pids:
    assert len(steps.get(pid, ())) >= min_steps, f"rank {pid}: {len(steps.get(pid, ()))} steps"
print(f"trace ok: {len(events)} events, {processes} processes, {len(by_thread)} threads")
