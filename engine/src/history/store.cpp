#include <baton/core/error.h>
#include <baton/history/store.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>

#include "db.h"

namespace baton {
using namespace history_detail;

std::string default_history_db_path() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/baton/runs.db";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/baton/runs.db";
}

void RunFilter::add(const std::string& key_value) {
  const size_t eq = key_value.find('=');
  const std::string key = key_value.substr(0, eq);
  const std::string value = eq == std::string::npos ? "" : key_value.substr(eq + 1);
  if (eq == std::string::npos || value.empty()) {
    throw InputError("--filter \"" + key_value +
                     "\": expected key=value with key status, strategy or tag");
  }
  if (key == "status") {
    if (value != "running" && value != "completed" && value != "failed" && value != "interrupted") {
      throw InputError("--filter status=" + value +
                       ": expected one of running, completed, failed, interrupted");
    }
    status = value;
  } else if (key == "strategy") {
    strategy = value;
  } else if (key == "tag") {
    tag = value;
  } else {
    throw InputError("--filter " + key_value + ": unknown key \"" + key +
                     "\" (known keys: status, strategy, tag)");
  }
}

struct HistoryStore::Impl {
  Db db;
  int64_t schema = 0;
  int64_t metric_id(const std::string& name) const {
    Stmt st(db, "SELECT id FROM metrics WHERE name = ?1");
    st.bind(1, name);
    return st.step() ? st.col_int(0) : 0;
  }
};

int mark_interrupted_runs(const std::string& path) {
  return history_detail::mark_dead_runs_interrupted_in(path);
}

HistoryStore::HistoryStore(const std::string& path, Open mode) : impl_(std::make_unique<Impl>()) {
  impl_->db = open_history_db(path, mode == Open::kReadOnly   ? OpenMode::kReadOnly
                                    : mode == Open::kExisting ? OpenMode::kExisting
                                                              : OpenMode::kCreate);
  impl_->schema = impl_->db.scalar_int("PRAGMA user_version");
}
HistoryStore::~HistoryStore() = default;
HistoryStore::HistoryStore(HistoryStore&&) noexcept = default;
HistoryStore& HistoryStore::operator=(HistoryStore&&) noexcept = default;

const std::string& HistoryStore::path() const { return impl_->db.path(); }

int HistoryStore::schema_version() const {
  return static_cast<int>(impl_->db.scalar_int("PRAGMA user_version"));
}

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t comma = s.find(',', pos);
    out.push_back(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

nlohmann::json parse_or_empty(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

constexpr const char* kRunColumns =
    "r.id, r.uid, r.name, r.status, r.start_time, coalesce(r.end_time, 0), r.strategy, "
    "r.replicas, r.hosts, r.notes, r.error, r.final_metrics, "
    "(SELECT group_concat(tag, ',') FROM (SELECT tag FROM tags t WHERE t.run = r.id ORDER BY "
    "tag)), coalesce(r.owner_host, ''), coalesce(r.owner_pid, 0), coalesce(r.owner_start, '')";
constexpr int kRunColumnCount = 16;

RunRecord read_run(const Stmt& st) {
  RunRecord r;
  r.id = st.col_int(0);
  r.uid = st.col_text(1);
  r.name = st.col_text(2);
  r.status = st.col_text(3);
  r.start_time = st.col_double(4);
  r.end_time = st.col_double(5);
  r.strategy = st.col_text(6);
  r.replicas = static_cast<int>(st.col_int(7));
  for (const auto& h : parse_or_empty(st.col_text(8))) {
    if (h.is_string()) r.hosts.push_back(h.get<std::string>());
  }
  r.notes = st.col_text(9);
  r.error = st.col_text(10);
  r.final_metrics = parse_or_empty(st.col_text(11));
  r.tags = split_list(st.col_text(12));
  // As seen: a run whose recorder on this host is gone is interrupted (a
  // writer's open stores it so; a read-only reader only shows it).
  if (r.status == "running" && !st.col_text(13).empty() && st.col_text(13) == this_process().host &&
      !process_alive(st.col_int(14), st.col_text(15))) {
    r.status = "interrupted";
  }
  return r;
}

}  // namespace

std::vector<RunRecord> HistoryStore::list_runs(const RunFilter& f) const {
  Stmt st(impl_->db, std::string("SELECT ") + kRunColumns + R"sql(
    FROM runs r
    WHERE r.status != 'deleting' AND (?1 = '' OR r.status = ?1) AND (?2 = '' OR r.strategy = ?2)
      AND (?3 = '' OR EXISTS (SELECT 1 FROM tags t WHERE t.run = r.id AND t.tag = ?3))
    ORDER BY r.start_time DESC, r.id DESC LIMIT ?4)sql");
  st.bind(1, f.status).bind(2, f.strategy).bind(3, f.tag).bind(4, f.limit > 0 ? f.limit : -1);
  std::vector<RunRecord> out;
  while (st.step()) out.push_back(read_run(st));
  return out;
}

int64_t HistoryStore::resolve(const std::string& id) const {
  const Db& db = impl_->db;
  if (!id.empty() &&
      std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    Stmt st(db, "SELECT id FROM runs WHERE id = ?1 AND status != 'deleting'");
    st.bind(1, static_cast<int64_t>(std::strtoll(id.c_str(), nullptr, 10)));
    if (st.step()) return st.col_int(0);
  }
  {
    Stmt st(db, "SELECT id FROM runs WHERE uid = ?1 AND status != 'deleting'");
    st.bind(1, id);
    if (st.step()) return st.col_int(0);
  }
  Stmt st(db,
          "SELECT id, uid FROM runs WHERE substr(uid, 1, length(?1)) = ?1 AND status != "
          "'deleting' LIMIT 2");
  st.bind(1, id);
  if (!id.empty() && st.step()) {
    const int64_t found = st.col_int(0);
    const std::string first = st.col_text(1);
    if (!st.step()) return found;
    throw InputError("run \"" + id + "\": more than one run matches (" + first + ", " +
                     st.col_text(1) + ", ...) in " + db.path());
  }
  throw InputError("run \"" + id + "\": no such run in " + db.path() +
                   " (`baton history list` shows the runs)");
}

RunRecord HistoryStore::run(int64_t id) const {
  Stmt st(impl_->db, std::string("SELECT ") + kRunColumns +
                         ", r.config, r.topology, r.start_info FROM runs r WHERE r.id = ?1 AND "
                         "r.status != 'deleting'");
  st.bind(1, id);
  if (!st.step()) {
    throw InputError("run " + std::to_string(id) + ": no such run in " + impl_->db.path());
  }
  RunRecord r = read_run(st);
  r.config = parse_or_empty(st.col_text(kRunColumnCount));
  r.topology = parse_or_empty(st.col_text(kRunColumnCount + 1));
  r.start_info = parse_or_empty(st.col_text(kRunColumnCount + 2));
  return r;
}

std::vector<MetricSummary> HistoryStore::metric_summary(int64_t run) const {
  // From the coarsest rollups: a handful of rows however long the run.
  Stmt st(impl_->db, R"sql(
    SELECT m.name, g.rank, g.c, g.ls, g.lo, g.hi,
           (SELECT x.last FROM metric_rollups x WHERE x.run = ?1 AND x.metric = g.metric
              AND x.rank = g.rank AND x.level = ?2 AND x.block = g.ls >> ?3)
    FROM (SELECT metric, rank, sum(count) AS c, max(last_step) AS ls, min(min) AS lo,
                 max(max) AS hi
          FROM metric_rollups WHERE run = ?1 AND level = ?2 GROUP BY metric, rank) AS g
    JOIN metrics m ON m.id = g.metric
    ORDER BY g.metric, g.rank)sql");
  st.bind(1, run).bind(2, kRollupLevels).bind(3, kRollupShift[kRollupLevels - 1]);
  std::vector<MetricSummary> out;
  while (st.step()) {
    MetricSummary s;
    s.metric = st.col_text(0);
    s.rank = static_cast<int>(st.col_int(1));
    s.count = st.col_int(2);
    s.last_step = st.col_int(3);
    s.min = st.col_double(4);
    s.max = st.col_double(5);
    s.last = st.col_double(6);
    out.push_back(s);
  }
  return out;
}

void HistoryStore::for_each_sample(int64_t run, const std::function<void(const MetricSample&)>& fn,
                                   const std::string& metric) const {
  // Each metric's series is one range of the primary key (run, metric,
  // step, rank, seq), already in step order: a cursor per metric, merged
  // by (step, rank, seq, metric). Memory stays one row per metric however
  // long the run (an ORDER BY over the whole run sorted it in memory).
  const Db& db = impl_->db;
  struct Cursor {
    Stmt st;
    std::string name;
    int64_t metric = 0;
    bool live = false;
  };
  std::vector<Cursor> cursors;
  {
    Stmt ids(db,
             "SELECT id, name FROM metrics WHERE (?1 = '' OR name = ?1) AND EXISTS (SELECT 1 FROM "
             "metric_samples s WHERE s.run = ?2 AND s.metric = metrics.id) ORDER BY id");
    ids.bind(1, metric).bind(2, run);
    while (ids.step()) {
      Cursor c;
      c.metric = ids.col_int(0);
      c.name = ids.col_text(1);
      c.st = Stmt(db,
                  "SELECT step, rank, seq, wall_time_s, value FROM metric_samples WHERE run = ?1 "
                  "AND metric = ?2 ORDER BY step, rank, seq");
      c.st.bind(1, run).bind(2, c.metric);
      cursors.push_back(std::move(c));
    }
  }
  for (Cursor& c : cursors) c.live = c.st.step();
  auto before = [](const Cursor& a, const Cursor& b) {
    const int64_t as = a.st.col_int(0), bs = b.st.col_int(0);
    if (as != bs) return as < bs;
    const int64_t ar = a.st.col_int(1), br = b.st.col_int(1);
    if (ar != br) return ar < br;
    const int64_t aq = a.st.col_int(2), bq = b.st.col_int(2);
    if (aq != bq) return aq < bq;
    return a.metric < b.metric;
  };
  MetricSample s;
  for (;;) {
    Cursor* next = nullptr;
    for (Cursor& c : cursors) {
      if (c.live && (next == nullptr || before(c, *next))) next = &c;
    }
    if (next == nullptr) break;
    s.step = next->st.col_int(0);
    s.rank = static_cast<int>(next->st.col_int(1));
    s.wall_time_s = next->st.col_double(3);
    s.metric = next->name;
    s.value = next->st.col_double(4);
    fn(s);
    next->live = next->st.step();
  }
}

std::vector<std::string> HistoryStore::metrics_of(int64_t run) const {
  Stmt st(impl_->db,
          "SELECT name FROM metrics m WHERE EXISTS (SELECT 1 FROM metric_rollups r WHERE r.run = "
          "?1 AND r.metric = m.id AND r.level = ?2) ORDER BY id");
  st.bind(1, run).bind(2, kRollupLevels);
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.col_text(0));
  return out;
}

std::vector<LinkRecord> HistoryStore::links(int64_t run, int64_t max_per_link) const {
  // Columns a read-only open of an older schema lacks: their defaults.
  const std::string later = std::string(impl_->schema >= 3 ? "wait_s" : "0.0") + " AS w, " +
                            (impl_->schema >= 7 ? "eager" : "0") + " AS e";
  // Capped: every k-th sample of each link (k from its count), and its last.
  Stmt st(impl_->db,
          max_per_link <= 0
              ? "SELECT step, wall_time_s, src, dst, num_bytes, seconds, estimated, " + later +
                    " FROM link_samples WHERE run = ?1 ORDER BY step, seq"
              : "SELECT step, wall_time_s, src, dst, num_bytes, seconds, estimated, w, e FROM ("
                "SELECT step, wall_time_s, src, dst, num_bytes, seconds, estimated, " +
                    later +
                    ", seq, row_number() OVER (PARTITION BY src, dst ORDER BY step, seq) AS "
                    "i, count(*) OVER (PARTITION BY src, dst) AS n FROM link_samples WHERE run "
                    "= ?1) WHERE n <= ?2 OR i % ((n + ?2 - 1) / ?2) = 0 OR i = n ORDER BY step, "
                    "seq");
  st.bind(1, run);
  if (max_per_link > 0) st.bind(2, max_per_link);
  std::vector<LinkRecord> out;
  while (st.step()) {
    out.push_back({st.col_int(0), st.col_double(1), static_cast<int>(st.col_int(2)),
                   static_cast<int>(st.col_int(3)), st.col_int(4), st.col_double(5),
                   st.col_int(6) != 0, st.col_double(7), st.col_int(8) != 0});
  }
  return out;
}

std::vector<RunEventRecord> HistoryStore::events(int64_t run) const {
  Stmt st(impl_->db,
          "SELECT step, seq, wall_time_s, kind, level, message, data FROM events WHERE run = ?1 "
          "ORDER BY seq");
  st.bind(1, run);
  std::vector<RunEventRecord> out;
  while (st.step()) {
    out.push_back({st.col_int(0), st.col_int(1), st.col_double(2), st.col_text(3), st.col_text(4),
                   st.col_text(5), parse_or_empty(st.col_text(6))});
  }
  return out;
}

std::vector<nlohmann::json> HistoryStore::timelines(int64_t run) const {
  // A database from before timelines (read-only opens do not migrate).
  if (schema_version() < 6) return {};
  Stmt st(impl_->db, "SELECT attempt, record FROM timelines WHERE run = ?1 ORDER BY attempt");
  st.bind(1, run);
  std::vector<nlohmann::json> out;
  while (st.step()) {
    nlohmann::json j = nlohmann::json::parse(st.col_text(1), nullptr, false);
    if (j.is_discarded()) {
      throw RuntimeError(path() + ": run " + std::to_string(run) + ": timeline " +
                         std::to_string(st.col_int(0)) + " is not valid JSON");
    }
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

struct Bucket {
  SeriesBucket b;
  bool set = false;
};

void merge(Bucket* into, const SeriesBucket& add) {
  if (!into->set) {
    into->b = add;
    into->set = true;
    return;
  }
  SeriesBucket& b = into->b;
  b.first_step = std::min(b.first_step, add.first_step);
  if (add.last_step >= b.last_step) {
    b.last_step = add.last_step;
    b.last = add.last;
  }
  b.count += add.count;
  // NaN (no finite sample) loses to any number.
  if (std::isnan(b.min) || add.min < b.min) b.min = add.min;
  if (std::isnan(b.max) || add.max > b.max) b.max = add.max;
}

}  // namespace

std::vector<SeriesBucket> HistoryStore::downsample(int64_t run, const std::string& metric,
                                                   int64_t from, int64_t to, int buckets,
                                                   int rank) const {
  if (buckets < 1)
    throw InputError("downsample: buckets must be >= 1, got " + std::to_string(buckets));
  const Db& db = impl_->db;
  const int64_t mid = impl_->metric_id(metric);
  if (mid == 0) return {};
  if (to < from) {
    Stmt st(db,
            "SELECT min(first_step), max(last_step) FROM metric_rollups WHERE run = ?1 AND "
            "metric = ?2 AND rank = ?3 AND level = ?4");
    st.bind(1, run).bind(2, mid).bind(3, rank).bind(4, kRollupLevels);
    if (!st.step() || st.col_is_null(0)) return {};
    from = st.col_int(0);
    to = st.col_int(1);
  }
  from = std::max<int64_t>(from, 0);
  if (to < from) return {};
  const int64_t span = to - from + 1;
  const int64_t want = (span + buckets - 1) / buckets;  // the narrowest allowed width
  int level = 0;
  for (int l = kRollupLevels; l >= 1; --l) {
    if ((int64_t{1} << kRollupShift[l - 1]) * 4 <= want) {
      level = l;
      break;
    }
  }
  int64_t width = want, origin = from;
  const int shift = level > 0 ? kRollupShift[level - 1] : 0;
  if (level > 0) {
    const int64_t block = int64_t{1} << shift;
    width = (want + block - 1) / block * block;
    origin = from >> shift << shift;
  }
  std::map<int64_t, Bucket> out;
  // The samples of steps [a, b], bucketed; the last value is the one at the
  // bucket's greatest step (the newest record there).
  Stmt raw(db, R"sql(
    SELECT g.k, g.f, g.l, g.c, g.lo, g.hi,
           (SELECT s.value FROM metric_samples s WHERE s.run = ?1 AND s.metric = ?2
              AND s.step = g.l AND s.rank = ?3 ORDER BY s.seq DESC LIMIT 1)
    FROM (SELECT (step - ?6) / ?7 AS k, min(step) AS f, max(step) AS l, count(*) AS c,
                 min(value) AS lo, max(value) AS hi
          FROM metric_samples WHERE run = ?1 AND metric = ?2 AND rank = ?3
            AND step BETWEEN ?4 AND ?5 GROUP BY k) AS g)sql");
  auto read_into = [&](Stmt& st) {
    while (st.step()) {
      merge(&out[st.col_int(0)],
            SeriesBucket{st.col_int(1), st.col_int(2), st.col_int(3), st.col_double(4),
                         st.col_double(5), st.col_double(6), 0.0});
    }
    st.reset();
  };
  auto raw_range = [&](int64_t a, int64_t b) {
    if (a > b) return;
    raw.bind(1, run).bind(2, mid).bind(3, rank).bind(4, a).bind(5, b).bind(6, origin).bind(7,
                                                                                           width);
    read_into(raw);
  };
  if (level == 0) {
    raw_range(from, to);
  } else {
    // Whole blocks inside [from, to] from the rollups, the partial blocks
    // at either end from the samples.
    const int64_t block = int64_t{1} << shift;
    const int64_t b_lo = (from + block - 1) >> shift;
    const int64_t b_hi = ((to + 1) >> shift) - 1;
    Stmt roll(db, R"sql(
      SELECT g.k, g.f, g.l, g.c, g.lo, g.hi,
             (SELECT x.last FROM metric_rollups x WHERE x.run = ?1 AND x.metric = ?2
                AND x.rank = ?3 AND x.level = ?4 AND x.block = g.l >> ?7)
      FROM (SELECT ((block << ?7) - ?8) / ?9 AS k, min(first_step) AS f, max(last_step) AS l,
                   sum(count) AS c, min(min) AS lo, max(max) AS hi
            FROM metric_rollups WHERE run = ?1 AND metric = ?2 AND rank = ?3 AND level = ?4
              AND block BETWEEN ?5 AND ?6 GROUP BY k) AS g)sql");
    roll.bind(1, run).bind(2, mid).bind(3, rank).bind(4, level).bind(5, b_lo).bind(6, b_hi);
    roll.bind(7, shift).bind(8, origin).bind(9, width);
    read_into(roll);
    raw_range(from, std::min(to, b_lo * block - 1));
    raw_range(std::max(from, (b_hi + 1) * block), to);
  }
  std::vector<SeriesBucket> result;
  result.reserve(out.size());
  // Each bucket's last value's wall time (a key seek per bucket), so a
  // downsampled series has a time axis too.
  Stmt wall(db,
            "SELECT wall_time_s FROM metric_samples WHERE run = ?1 AND metric = ?2 AND step = ?3 "
            "AND rank = ?4 ORDER BY seq DESC LIMIT 1");
  for (auto& [k, b] : out) {
    wall.bind(1, run).bind(2, mid).bind(3, b.b.last_step).bind(4, rank);
    if (wall.step()) b.b.last_wall_time_s = wall.col_double(0);
    wall.reset();
    result.push_back(b.b);
  }
  return result;
}

void HistoryStore::add_tag(int64_t run, const std::string& tag) {
  if (tag.empty() || tag.find_first_of(", \t\r\n") != std::string::npos) {
    throw InputError("tag \"" + tag + "\": expected a non-empty word without spaces or commas");
  }
  Transaction tx(impl_->db);
  this->run(run);  // InputError if absent
  Stmt st(impl_->db, "INSERT OR IGNORE INTO tags (run, tag) VALUES (?1, ?2)");
  st.bind(1, run).bind(2, tag).run();
  tx.commit();
}

void HistoryStore::set_note(int64_t run, const std::string& text) {
  Transaction tx(impl_->db);
  Stmt st(impl_->db, "UPDATE runs SET notes = ?2 WHERE id = ?1");
  st.bind(1, run).bind(2, text).run();
  if (sqlite3_changes(impl_->db.get()) == 0) this->run(run);
  tx.commit();
}

bool HistoryStore::record_launcher_event(const std::string& uid, int64_t step,
                                         const std::string& level, const std::string& message,
                                         const std::string& data, bool final) {
  const Db& db = impl_->db;
  Transaction tx(db);
  Stmt find(db, "SELECT id, start_time FROM runs WHERE uid = ?1 AND status != 'deleting'");
  find.bind(1, uid);
  if (!find.step()) return false;
  const int64_t run = find.col_int(0);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double wall = std::max(0.0, now - find.col_double(1));
  // After everything recorded so far, in the run's one sequence.
  Stmt seq(db, R"sql(
    SELECT max(seq) FROM (
      SELECT seq FROM metric_samples WHERE run = ?1
      UNION ALL SELECT seq FROM link_samples WHERE run = ?1
      UNION ALL SELECT seq FROM events WHERE run = ?1))sql");
  seq.bind(1, run);
  seq.step();
  const int64_t next = seq.col_is_null(0) ? 1 : seq.col_int(0) + 1;
  Stmt ev(db,
          "INSERT INTO events (run, step, seq, wall_time_s, kind, level, message, data) "
          "VALUES (?1, ?2, ?3, ?4, ?7, ?8, ?5, ?6)");
  ev.bind(1, run).bind(2, std::max<int64_t>(0, step)).bind(3, next).bind(4, wall);
  const bool error = level == "error";
  ev.bind(5, message).bind(6, data).bind(7, error ? "error" : "log");
  ev.bind(8, error ? "error" : "info").run();
  if (final) {
    Stmt upd(db, "UPDATE runs SET status = 'failed', error = ?2, end_time = ?3 WHERE id = ?1");
    upd.bind(1, run).bind(2, message).bind(3, now).run();
  }
  tx.commit();
  return true;
}

void HistoryStore::remove_run(int64_t run) {
  const Db& db = impl_->db;
  {
    Transaction tx(db);
    // A run still recording is refused (its recorder would fail on the
    // next batch); the interrupted rule at open has marked the dead ones.
    Stmt who(db,
             "SELECT status, coalesce(owner_host, ''), coalesce(owner_pid, 0), uid FROM runs "
             "WHERE id = ?1 AND status != 'deleting'");
    who.bind(1, run);
    if (!who.step()) this->run(run);  // throws: no such run
    if (who.col_text(0) == "running") {
      throw InputError("run " + std::to_string(run) + " (" + who.col_text(3) +
                       ") is still recording (process " + std::to_string(who.col_int(2)) + " on " +
                       who.col_text(1) + "); stop it, or wait for it to end, before deleting it");
    }
    // The deleter becomes the run's owner: a delete cut short (its process
    // gone) is finished by the next writer's open, one still running is not.
    const ProcessIdentity me = this_process();
    Stmt mark(db,
              "UPDATE runs SET status = 'deleting', owner_host = ?2, owner_pid = ?3, "
              "owner_start = ?4 WHERE id = ?1");
    mark.bind(1, run).bind(2, me.host).bind(3, me.pid).bind(4, me.start).run();
    tx.commit();
  }
  delete_marked_run(db, run);
}

std::string HistoryStore::integrity_check() const {
  Stmt st(impl_->db, "PRAGMA integrity_check");
  std::string out;
  while (st.step()) out += (out.empty() ? "" : "\n") + st.col_text(0);
  return out;
}

}  // namespace baton
