#include "history_command.h"

#include <baton/core/error.h>
#include <baton/history/store.h>
#include <baton/telemetry/chrome_trace.h>
#include <locale.h>
#include <wchar.h>

#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cwchar>
#include <filesystem>
#include <limits>
#include <memory>

#include "cli_checks.h"
#include "output_file.h"

namespace baton::cli {

void add_history_command(CLI::App& app, HistoryArgs& a) {
  CLI::App* h = app.add_subcommand("history", "List, show, compare and export recorded runs");
  h->require_subcommand(1);
  auto db = [&](CLI::App* c) {
    c->add_option("--db", a.db,
                  "History database (default: $XDG_DATA_HOME/baton/runs.db, "
                  "~/.local/share/baton/runs.db)");
  };
  a.list = h->add_subcommand("list", "List recorded runs, newest first");
  db(a.list);
  a.list->add_flag("--json", a.json, "Print a JSON array");
  a.list
      ->add_option("--filter", a.filters,
                   "Only runs with status=S, strategy=S or tag=T (repeatable: all must match)")
      ->take_all();
  a.list->add_option("--limit", a.limit, "At most N runs (0: all)")
      ->check(integer_in(0, std::numeric_limits<long long>::max()));

  a.show = h->add_subcommand("show", "A run's config, summary and last/min/max per metric");
  db(a.show);
  a.show->add_option("id", a.id, "Run: its number, its run id, or a unique prefix")->required();
  a.show->add_flag("--json", a.json, "Print JSON");

  a.export_ = h->add_subcommand("export", "Write a run's samples as CSV or JSON");
  db(a.export_);
  a.export_->add_option("id", a.id, "Run: its number, its run id, or a unique prefix")->required();
  a.export_->add_option("--format", a.format, "csv (step,wall_time_s,rank,metric,value) or json")
      ->required()
      ->check(CLI::IsMember({"csv", "json"}));
  a.export_->add_option("--out", a.out,
                        "Write to FILE ('-' or none: stdout); a regular file is replaced only "
                        "once the export is complete");

  a.timeline = h->add_subcommand(
      "timeline",
      "Write the Chrome trace of a run recorded with --timeline (open it in Perfetto or "
      "chrome://tracing)");
  db(a.timeline);
  a.timeline->add_option("id", a.id, "Run: its number, its run id, or a unique prefix")
      ->required();
  a.timeline->add_option("--out,-o", a.out,
                         "Write to FILE ('-' or none: stdout); a regular file is replaced only "
                         "once the trace is complete");
  a.timeline
      ->add_option("--attempt", a.attempt,
                   "Which of the run's recorded timelines, 1 for the first (a restarted or "
                   "resumed run records one per attempt); default: the last")
      ->check(integer_in(1, std::numeric_limits<int>::max()));

  a.diff = h->add_subcommand("diff", "Config differences between two runs, key by key");
  db(a.diff);
  a.diff->add_option("id1", a.id, "First run")->required();
  a.diff->add_option("id2", a.id2, "Second run")->required();

  a.tag = h->add_subcommand("tag", "Tag a run");
  db(a.tag);
  a.tag->add_option("id", a.id, "Run")->required();
  a.tag->add_option("tag", a.text, "Tag (a word: no spaces or commas)")->required();

  a.note = h->add_subcommand("note", "Set a run's note");
  db(a.note);
  a.note->add_option("id", a.id, "Run")->required();
  a.note->add_option("text", a.text, "The note (replaces the previous one)")->required();

  a.remove = h->add_subcommand("delete", "Delete a run and everything recorded for it");
  db(a.remove);
  a.remove->add_option("id", a.id, "Run")->required();
}

namespace {

std::string local_time(double unix_s) {
  if (unix_s <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string duration(const RunRecord& r) {
  if (r.end_time <= 0) return "-";
  char buf[32];
  const double s = r.end_time - r.start_time;
  if (s < 120) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 7200) {
    std::snprintf(buf, sizeof buf, "%.1fm", s / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fh", s / 3600);
  }
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The columns a UTF-8 text takes on a terminal (wcwidth under a UTF-8
// locale: a CJK character is two, a combining mark none); bytes that are
// not UTF-8 count one each.
size_t display_width(const std::string& s) {
  static_assert(sizeof(wchar_t) >= 4, "wcwidth needs a UCS-4 wchar_t");
  const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  if (utf8 == static_cast<locale_t>(nullptr)) return s.size();
  const locale_t before = ::uselocale(utf8);
  size_t width = 0;
  std::mbstate_t state{};
  for (size_t i = 0; i < s.size();) {
    wchar_t c = 0;
    const size_t n = std::mbrtowc(&c, s.data() + i, s.size() - i, &state);
    if (n == static_cast<size_t>(-1) || n == static_cast<size_t>(-2) || n == 0) {
      state = std::mbstate_t{};
      ++width;
      ++i;
      continue;
    }
    const int w = ::wcwidth(c);
    width += w < 0 ? 1 : static_cast<size_t>(w);
    i += n;
  }
  ::uselocale(before);
  ::freelocale(utf8);
  return width;
}

// s, then spaces to `width` display columns.
std::string pad(const std::string& s, size_t width) {
  const size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

int list(const HistoryArgs& a, const std::string& path) {
  RunFilter filter;
  for (const auto& f : a.filters) filter.add(f);  // checked before the file is opened
  filter.limit = a.limit;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (a.json) {
      std::printf("[]\n");
    } else {
      std::printf("no runs recorded yet (no history database at %s)\n", path.c_str());
    }
    return 0;
  }
  const HistoryStore store(path, HistoryStore::Open::kReadOnly);
  const auto runs = store.list_runs(filter);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : runs) arr.push_back(run_to_json(r, /*full=*/false));
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  if (runs.empty()) {
    std::printf("no runs%s in %s\n", a.filters.empty() ? "" : " match", path.c_str());
    return 0;
  }
  size_t w = 3;
  for (const auto& r : runs) w = std::max(w, display_width(r.uid));
  std::printf("%5s  %s  %-11s  %-21s  %4s  %-19s  %8s  %10s  %s\n", "ID", pad("RUN", w).c_str(),
              "STATUS", "STRATEGY", "REPL", "STARTED", "DURATION", "LOSS", "TAGS");
  for (const auto& r : runs) {
    const auto loss = r.final_metrics.find("train_loss");
    const std::string l =
        loss != r.final_metrics.end() && loss->is_number() ? fmt(loss->get<double>()) : "-";
    std::printf("%5lld  %s  %-11s  %-21s  %4d  %-19s  %8s  %10s  %s\n",
                static_cast<long long>(r.id), pad(r.uid, w).c_str(), r.status.c_str(),
                r.strategy.c_str(), r.replicas, local_time(r.start_time).c_str(),
                duration(r).c_str(), l.c_str(), join(r.tags, ",").c_str());
  }
  return 0;
}

// A run's attempts: each resume (a "restart" event) starts one; a
// supervisor's records (baton launch's "error" events for a failure,
// "info" ones for an elastic rescale) say why the one before ended.
struct AttemptLine {
  int64_t step;
  std::string text;
};
std::vector<AttemptLine> attempt_lines(const HistoryStore& store, int64_t run) {
  std::vector<AttemptLine> out;
  for (const auto& e : store.events(run)) {
    const bool launcher = (e.kind == "error" || e.kind == "log") && e.data.is_object() &&
                          e.data.value("source", "") == "launcher";
    if (e.kind == "restart" || launcher) out.push_back({e.step, e.message});
  }
  return out;
}

int show(const HistoryArgs& a, const HistoryStore& store) {
  const RunRecord r = store.run(store.resolve(a.id));
  const auto metrics = store.metric_summary(r.id);
  const auto attempts = attempt_lines(store, r.id);
  int resumes = 0;
  for (const auto& e : store.events(r.id)) resumes += e.kind == "restart" ? 1 : 0;
  if (a.json) {
    nlohmann::json j = run_to_json(r, /*full=*/true);
    j["attempts"] = resumes + 1;
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& l : attempts) lines.push_back({{"step", l.step}, {"message", l.text}});
    j["attempt_events"] = lines;
    nlohmann::json m = nlohmann::json::array();
    for (const auto& s : metrics) {
      m.push_back({{"metric", s.metric},
                   {"rank", s.rank},
                   {"count", s.count},
                   {"last_step", s.last_step},
                   {"last", number_or_null(s.last)},
                   {"min", number_or_null(s.min)},
                   {"max", number_or_null(s.max)}});
    }
    j["metrics"] = m;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("run         %lld  %s\n", static_cast<long long>(r.id), r.uid.c_str());
  std::printf("name        %s\n", r.name.c_str());
  std::printf("status      %s\n", r.status.c_str());
  std::printf("strategy    %s, %d replica(s)\n", r.strategy.c_str(), r.replicas);
  std::printf("hosts       %s\n", join(r.hosts, ", ").c_str());
  std::printf("started     %s\n", local_time(r.start_time).c_str());
  std::printf("ended       %s (%s)\n", local_time(r.end_time).c_str(), duration(r).c_str());
  if (!r.tags.empty()) std::printf("tags        %s\n", join(r.tags, ", ").c_str());
  if (!r.notes.empty()) std::printf("notes       %s\n", r.notes.c_str());
  if (!r.error.empty()) std::printf("error       %s\n", r.error.c_str());
  if (resumes > 0 || !attempts.empty()) {
    std::printf("attempts    %d\n", resumes + 1);
    for (const auto& l : attempts) {
      std::printf("  step %-6lld %s\n", static_cast<long long>(l.step), l.text.c_str());
    }
  }
  if (!r.final_metrics.empty()) {
    std::printf("final      ");
    for (auto it = r.final_metrics.begin(); it != r.final_metrics.end(); ++it) {
      std::printf(" %s %s", it.key().c_str(),
                  it->is_number() ? fmt(it->get<double>()).c_str() : it->dump().c_str());
    }
    std::printf("\n");
  }
  if (!metrics.empty()) {
    std::printf("\n%-20s %4s %8s %14s %12s %12s %12s\n", "metric", "rank", "samples", "last",
                "(at step)", "min", "max");
    for (const auto& s : metrics) {
      std::printf("%-20s %4d %8lld %14s %12lld %12s %12s\n", s.metric.c_str(), s.rank,
                  static_cast<long long>(s.count), fmt(s.last).c_str(),
                  static_cast<long long>(s.last_step), fmt(s.min).c_str(), fmt(s.max).c_str());
    }
  }
  std::printf("\nconfig\n%s\n", r.config.dump(2).c_str());
  return 0;
}

int export_run(const HistoryArgs& a, const HistoryStore& store) {
  const int64_t id = store.resolve(a.id);
  OutputFile out("--out", a.out);  // checked before anything is written
  try {
    if (a.format == "csv") {
      export_run_csv(store, id, out.get());
    } else {
      export_run_json(store, id, out.get());
    }
  } catch (const RuntimeError& e) {
    if (std::ferror(out.get()) == 0) throw;
    // A failed write: name where it went (a regular file is left as it was).
    throw RuntimeError(
        (a.out.empty() || a.out == "-" ? std::string("standard output") : "--out " + a.out) + ": " +
        e.what());
  }
  out.commit();
  return 0;
}

int timeline(const HistoryArgs& a, const HistoryStore& store) {
  const int64_t id = store.resolve(a.id);
  const std::vector<nlohmann::json> all = store.timelines(id);
  if (all.empty()) {
    throw InputError("run " + std::to_string(id) +
                     " has no timeline: record one with baton train --timeline FILE (or baton "
                     "launch --timeline FILE)");
  }
  if (a.attempt > static_cast<long long>(all.size())) {
    throw InputError("--attempt " + std::to_string(a.attempt) + ": run " + std::to_string(id) +
                     " recorded " + std::to_string(all.size()) + " timeline" +
                     (all.size() == 1 ? "" : "s"));
  }
  const nlohmann::json& record = all[a.attempt > 0 ? static_cast<size_t>(a.attempt - 1)
                                                   : all.size() - 1];
  // A record read back from a file may hold bytes that are not UTF-8.
  const std::string text =
      chrome_trace(record).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  OutputFile out("--out", a.out);
  if (std::fwrite(text.data(), 1, text.size(), out.get()) != text.size()) {
    throw RuntimeError((a.out.empty() || a.out == "-" ? std::string("standard output")
                                                     : "--out " + a.out) +
                       ": write failed (" + std::strerror(errno) + ")");
  }
  out.commit();
  return 0;
}

int diff(const HistoryArgs& a, const HistoryStore& store) {
  const RunRecord r1 = store.run(store.resolve(a.id));
  const RunRecord r2 = store.run(store.resolve(a.id2));
  std::printf("--- %lld %s\n+++ %lld %s\n", static_cast<long long>(r1.id), r1.uid.c_str(),
              static_cast<long long>(r2.id), r2.uid.c_str());
  const auto changes = diff_configs(r1.config, r2.config);
  if (changes.empty()) std::printf("the configs are identical\n");
  for (const auto& c : changes) {
    switch (c.kind) {
      case ConfigChange::Kind::kAdded:
        std::printf("+ %s: %s\n", c.key.c_str(), c.after.dump().c_str());
        break;
      case ConfigChange::Kind::kRemoved:
        std::printf("- %s: %s\n", c.key.c_str(), c.before.dump().c_str());
        break;
      default:
        std::printf("~ %s: %s -> %s\n", c.key.c_str(), c.before.dump().c_str(),
                    c.after.dump().c_str());
    }
  }
  return 0;
}

}  // namespace

int run_history(const HistoryArgs& a) {
  const std::string path = a.db.empty() ? default_history_db_path() : a.db;
  if (a.list->parsed()) return list(a, path);
  // Reading commands never write the file (no migration, no interrupted
  // rule: a read-only history lists as well as any).
  if (a.show->parsed() || a.export_->parsed() || a.diff->parsed() || a.timeline->parsed()) {
    const HistoryStore reader(path, HistoryStore::Open::kReadOnly);
    if (a.show->parsed()) return show(a, reader);
    if (a.export_->parsed()) return export_run(a, reader);
    if (a.timeline->parsed()) return timeline(a, reader);
    return diff(a, reader);
  }
  HistoryStore store(path, HistoryStore::Open::kExisting);
  const int64_t id = store.resolve(a.id);
  if (a.tag->parsed()) {
    store.add_tag(id, a.text);
    std::printf("run %lld: tagged %s\n", static_cast<long long>(id), a.text.c_str());
  } else if (a.note->parsed()) {
    store.set_note(id, a.text);
    std::printf("run %lld: note set\n", static_cast<long long>(id));
  } else if (a.remove->parsed()) {
    const RunRecord r = store.run(id);
    store.remove_run(id);
    std::printf("deleted run %lld (%s)\n", static_cast<long long>(id), r.uid.c_str());
  }
  return 0;
}

}  // namespace baton::cli
