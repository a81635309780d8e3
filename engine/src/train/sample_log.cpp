#include <baton/core/error.h>
#include <baton/train/sample_log.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

namespace baton {

SampleLog::SampleLog(const std::string& dir, int64_t start_step, int first_replica,
                     int local_replicas, int num_replicas) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = (std::filesystem::path(dir) / ("from" + std::to_string(start_step) + "-replica" +
                                         std::to_string(first_replica) + ".samples"))
              .string();
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) {
    throw RuntimeError("--sample-log: cannot write " + path_ + ": " + std::strerror(errno));
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(file_, "# baton sample log: start_step %lld start_time %.6f replicas %d..%d of %d\n",
               static_cast<long long>(start_step), now, first_replica,
               first_replica + local_replicas - 1, num_replicas);
  flush();
}

SampleLog::~SampleLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void SampleLog::write(int64_t step, int replica, const Batch& b) {
  std::fprintf(file_, "%lld %lld %lld %d:", static_cast<long long>(step),
               static_cast<long long>(b.epoch), static_cast<long long>(b.index), replica);
  for (const int64_t i : b.samples) std::fprintf(file_, " %lld", static_cast<long long>(i));
  std::fputc('\n', file_);
}

void SampleLog::flush() {
  if (std::fflush(file_) != 0 || std::ferror(file_)) {
    throw RuntimeError("--sample-log: writing " + path_ + " failed: " + std::strerror(errno));
  }
}

namespace {

struct FileSteps {
  double start_time = 0;
  long long start_step = 0;
  int world = 0;  // the attempt's replicas
  std::map<int64_t, SampleLogStep> steps;
};

FileSteps read_one(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  FileSteps f;
  const std::string name = path.string();
  if (!std::getline(in, line) || line.rfind("# baton sample log: start_step ", 0) != 0) {
    throw InputError(name + ":1: not a baton sample log (no header line)");
  }
  {
    std::istringstream h(line.substr(std::strlen("# baton sample log: ")));
    std::string key;
    std::string range, of;
    if (!(h >> key >> f.start_step >> key >> f.start_time) || key != "start_time" ||
        !(h >> key >> range >> of >> f.world) || key != "replicas" || of != "of") {
      throw InputError(name + ":1: a header without start_step, start_time and replicas");
    }
  }
  std::string rest;
  std::getline(in, rest, '\0');  // the lines after the header
  size_t pos = 0, line_no = 1;
  while (pos < rest.size()) {
    const size_t nl = rest.find('\n', pos);
    if (nl == std::string::npos) break;  // a line cut by a kill
    const std::string text = rest.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    std::istringstream ls(text);
    long long step = 0, epoch = 0, batch = 0;
    std::string replica;
    if (!(ls >> step >> epoch >> batch >> replica) || replica.empty() || replica.back() != ':') {
      throw InputError(name + ":" + std::to_string(line_no) +
                       ": expected \"<step> <epoch> <batch> <replica>: <index> ...\"");
    }
    SampleLogStep& st = f.steps[step];
    st.epoch = epoch;
    st.batch = batch;
    ++st.replicas;
    long long i = 0;
    while (ls >> i) st.samples.push_back(i);
    if (!ls.eof()) {
      throw InputError(name + ":" + std::to_string(line_no) + ": a sample index is not a number");
    }
  }
  return f;
}

}  // namespace

std::map<int64_t, SampleLogStep> read_sample_logs(const std::string& dir) {
  // The files of one attempt share a start step and a replica count (an
  // attempt from the same step with as many replicas rewrote every file of
  // the one before; one with fewer left some of its files, which the newer
  // attempt's steps all supersede). Its newest start time orders it.
  std::map<std::pair<long long, int>, FileSteps> attempts;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".samples") continue;
    FileSteps f = read_one(e.path());
    FileSteps& a = attempts[{f.start_step, f.world}];
    a.start_time = std::max(a.start_time, f.start_time);
    a.start_step = f.start_step;
    for (auto& [step, st] : f.steps) {
      SampleLogStep& into = a.steps[step];
      into.epoch = st.epoch;
      into.batch = st.batch;
      into.replicas += st.replicas;
      into.samples.insert(into.samples.end(), st.samples.begin(), st.samples.end());
    }
  }
  std::vector<const FileSteps*> order;
  for (const auto& [key, a] : attempts) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const FileSteps* x, const FileSteps* y) {
    return std::tie(x->start_time, x->start_step) < std::tie(y->start_time, y->start_step);
  });
  std::map<int64_t, SampleLogStep> out;
  for (const FileSteps* a : order) {
    for (const auto& [step, st] : a->steps) out[step] = st;  // the later attempt wins
  }
  return out;
}

}  // namespace baton
