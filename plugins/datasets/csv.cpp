// csv: numeric CSV files, plain or gzip-compressed. Parsing is strict:
// every field must be a finite number that fits a float, every row must
// have the columns of the first one, and each error names path:line and
// the column, so a bad file is fixed in one look.
#include <baton/core/error.h>

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "datasets.h"

namespace baton::datasets {
namespace {

// More classes than this is almost surely a regression target or a typo;
// refusing it beats allocating a gigantic output layer.
constexpr int64_t kMaxClasses = int64_t{1} << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void split(std::string_view line, char delim, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    const size_t d = line.find(delim, start);
    out.push_back(line.substr(start, d == std::string_view::npos ? d : d - start));
    if (d == std::string_view::npos) return;
    start = d + 1;
  }
}

// For text that from_chars accepted but could not represent: true when its
// magnitude is below 1 (an underflow, which reads as 0), false when above
// (an overflow). Uses the decimal exponent of the leading significant digit.
bool underflows(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  int64_t int_digits = 0, frac_zeros = 0;
  bool point = false, significant = false;
  for (; i < s.size() && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9')); ++i) {
    if (s[i] == '.') {
      point = true;
    } else if (s[i] != '0' || significant) {
      significant = true;
      if (!point) ++int_digits;
    } else if (point) {
      ++frac_zeros;
    }
  }
  int64_t exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool neg = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      exp = std::min<int64_t>(exp * 10 + (s[i] - '0'), int64_t{1} << 40);  // saturate
    }
    if (neg) exp = -exp;
  }
  const int64_t magnitude = int_digits > 0 ? int_digits - 1 : -(frac_zeros + 1);
  return magnitude + exp < 0;
}

enum class Parse { kOk, kEmpty, kNotNumber, kNotFinite, kOutOfRange };

// Strict decimal number: optional sign, digits, point, exponent; spaces
// around it are allowed. Values too small for T read as 0 (or a denormal).
template <class T>
Parse parse_number(std::string_view field, T& out) {
  std::string_view s = trim(field);
  if (s.empty()) return Parse::kEmpty;
  if (s.front() == '+') {  // from_chars refuses a leading '+'; people write it
    s.remove_prefix(1);
    if (s.empty() || s.front() == '-' || s.front() == '+') return Parse::kNotNumber;
  }
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  if (ec == std::errc::invalid_argument || p != end) return Parse::kNotNumber;
  if (ec == std::errc::result_out_of_range) {
    if (!underflows(s)) return Parse::kOutOfRange;
    double d = 0.0;
    auto r = std::from_chars(s.data(), end, d);
    out = r.ec == std::errc() ? static_cast<T>(d) : T(0);
    if (s.front() == '-') out = std::copysign(out, T(-1));
    return Parse::kOk;
  }
  // from_chars accepts "nan", "inf" and "infinity": not data.
  if (!std::isfinite(out)) return Parse::kNotFinite;
  return Parse::kOk;
}

struct Options {
  std::vector<std::string> paths;  // one or more files (a list or a glob)
  bool header = false;
  std::optional<std::string> label_name;
  int64_t label_index = -1;
  char delim = ',';
  bool classification = true;
  int64_t classes = 0;               // 0: largest label + 1
  std::vector<int64_t> image_shape;  // [C, H, W] when the rows are images
};

Options read_options(const ConfigNode& config, const DatasetContext& ctx) {
  Options o;
  config.accept("type");
  o.paths = input_paths(config, "path", ctx);
  o.header = config.boolean_or("header", false);
  if (config.has("image_shape")) o.image_shape = config.integer_list("image_shape", 1);
  // The label is a column name (a JSON string) or an index (an integer).
  if (config.has("label") && config.json().at("label").is_string()) {
    o.label_name = config.string("label");
    if (o.label_name->empty()) config.fail("label", "expected a column name, got \"\"");
    if (!o.header) {
      config.fail("label", "a column name needs \"header\": true (or give the column index)");
    }
  } else {
    o.label_index = config.integer_or("label", -1);
  }
  const std::string delim = config.string_or("delimiter", ",");
  // A delimiter that can occur inside a number would split numbers apart.
  if (delim.size() != 1 ||
      std::string_view("0123456789.+-eE\"\r\n").find(delim[0]) != std::string_view::npos) {
    config.fail("delimiter",
                "expected a single character that cannot occur in a number "
                "(such as \",\", \";\", \"\\t\" or \" \"), got " +
                    quote(delim));
  }
  o.delim = delim[0];
  o.classification = config.choice_or("task", "classification", {"classification", "regression"}) ==
                     "classification";
  if (config.has("classes")) {
    if (!o.classification) config.fail("classes", "applies only to \"task\": \"classification\"");
    o.classes = config.integer("classes", 2, kMaxClasses);
  }
  config.accept("classes");
  config.finish();
  return o;
}

// Finds the label column once the first row has fixed the column count.
size_t label_column(const ConfigNode& config, const Options& o, const std::string& path,
                    const std::vector<std::string>& names, size_t ncols) {
  if (o.label_name) {
    std::optional<size_t> found;
    for (size_t c = 0; c < names.size(); ++c) {
      if (names[c] != *o.label_name) continue;
      if (found) {
        config.fail("label", "column \"" + *o.label_name + "\" appears twice in the header of " +
                                 path + " (columns " + std::to_string(*found + 1) + " and " +
                                 std::to_string(c + 1) + ")");
      }
      found = c;
    }
    if (!found) {
      std::string list;
      for (size_t c = 0; c < names.size() && c < 20; ++c) list += (c ? ", " : "") + names[c];
      if (names.size() > 20) list += ", ... (" + std::to_string(names.size()) + " in all)";
      config.fail("label",
                  "column \"" + *o.label_name + "\" not in the header (columns: " + list + ")");
    }
    return *found;
  }
  const auto n = static_cast<int64_t>(ncols);
  const int64_t i = o.label_index < 0 ? o.label_index + n : o.label_index;
  if (i < 0 || i >= n) {
    config.fail("label", "column index " + std::to_string(o.label_index) +
                             " is out of range: " + path + " has " + std::to_string(n) +
                             " columns (use 0.." + std::to_string(n - 1) + ", or -" +
                             std::to_string(n) + "..-1 counting from the end)");
  }
  return static_cast<size_t>(i);
}

std::string header_name(const std::string_view field) {
  std::string_view s = trim(field);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return std::string(s);
}

// One file's rows, parsed and checked.
struct CsvFile {
  std::string path;
  int64_t rows = 0, features = 0, max_label = -1;
  std::vector<float> xs, targets;
  std::vector<int32_t> labels;
};

CsvFile read_csv_file(const ConfigNode& config, const Options& o, const std::string& path) {
  GzReader in(path);
  LineReader lines(in);

  std::vector<std::string> names;
  std::vector<std::string_view> fields;
  std::vector<float> xs, targets;
  std::vector<int32_t> labels;
  size_t ncols = 0, label_col = 0, first_line = 0, last_content = 0, blank = 0;
  int64_t rows = 0, max_label = -1;

  std::string_view line;
  while (lines.next(line)) {
    const size_t ln = lines.line_number();
    const std::string at = path + ":" + std::to_string(ln) + ": ";
    if (ln == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 BOM
    if (trim(line).empty()) {
      if (blank == 0) blank = ln;
      continue;
    }
    if (blank != 0) {
      throw InputError(path + ":" + std::to_string(blank) +
                       ": blank line inside the data (only trailing blank lines are allowed)");
    }
    last_content = ln;
    split(line, o.delim, fields);
    if (ncols == 0) {  // the first row fixes the column count
      ncols = fields.size();
      first_line = ln;
      if (ncols < 2) {
        throw InputError(at +
                         "found 1 column, expected at least 2 (features and a label; is "
                         "the delimiter " +
                         quote(std::string(1, o.delim)) + " right?)");
      }
      for (auto f : fields) names.push_back(o.header ? header_name(f) : std::string());
      label_col = label_column(config, o, path, names, ncols);
      if (o.header) continue;
    } else if (fields.size() != ncols) {
      const bool fewer = fields.size() < ncols;
      throw InputError(at + "column " + std::to_string(fewer ? fields.size() + 1 : ncols + 1) +
                       ": " + (fewer ? "missing" : "unexpected") + ": expected " +
                       std::to_string(ncols) + " columns as on line " + std::to_string(first_line) +
                       ", got " + std::to_string(fields.size()));
    }
    for (size_t c = 0; c < ncols; ++c) {
      const std::string col = "column " + std::to_string(c + 1) +
                              (names[c].empty() ? std::string() : " (" + quote(names[c]) + ")");
      Parse r;
      if (c == label_col && o.classification) {
        double d = 0.0;
        r = parse_number(fields[c], d);
        if (r == Parse::kOk) {
          if (d < 0 || d != std::floor(d)) {
            throw InputError(at + col + ": expected a class label (an integer >= 0), got " +
                             quote(trim(fields[c])));
          }
          const int64_t limit = o.classes > 0 ? o.classes : kMaxClasses;
          if (d >= static_cast<double>(limit)) {
            throw InputError(
                at + col + ": class label " + quote(trim(fields[c])) +
                (o.classes > 0
                     ? " is not below \"classes\" (" + std::to_string(o.classes) + ")"
                     : " is too large (at most " + std::to_string(kMaxClasses - 1) + ")"));
          }
          labels.push_back(static_cast<int32_t>(d));
          max_label = std::max<int64_t>(max_label, labels.back());
          continue;
        }
      } else {
        float v = 0.0f;
        r = parse_number(fields[c], v);
        if (r == Parse::kOk) {
          (c == label_col ? targets : xs).push_back(v);
          continue;
        }
      }
      switch (r) {
        case Parse::kEmpty:
          throw InputError(at + col + ": expected a number, got an empty field");
        case Parse::kNotFinite:
          throw InputError(at + col + ": expected a finite number, got " + quote(trim(fields[c])));
        case Parse::kOutOfRange:
          throw InputError(at + col + ": " + quote(trim(fields[c])) + " is out of float range");
        default:
          throw InputError(at + col + ": expected a number, got " + quote(trim(fields[c])));
      }
    }
    ++rows;
  }

  if (rows == 0) {
    throw InputError(path + ":" + std::to_string(last_content + 1) + ": no data rows" +
                     (last_content == 0 ? " (the file is empty)" : " after the header"));
  }
  CsvFile f;
  f.path = path;
  f.rows = rows;
  f.features = static_cast<int64_t>(ncols - 1);
  f.max_label = max_label;
  f.xs = std::move(xs);
  f.targets = std::move(targets);
  f.labels = std::move(labels);
  return f;
}

}  // namespace

std::shared_ptr<const Dataset> make_csv(const ConfigNode& config, const DatasetContext& ctx) {
  const Options o = read_options(config, ctx);
  std::vector<CsvFile> files;
  int64_t max_label = -1;
  for (const std::string& path : o.paths) {
    files.push_back(read_csv_file(config, o, path));
    max_label = std::max(max_label, files.back().max_label);
    if (files.back().features != files.front().features) {
      throw InputError(path + ": " + std::to_string(files.back().features) +
                       " feature columns, but " + files.front().path + " has " +
                       std::to_string(files.front().features) +
                       " (every file of the dataset needs the same columns)");
    }
  }
  // Classes over every file (one file may hold only some of them).
  const int64_t classes = o.classes > 0 ? o.classes : max_label + 1;
  if (o.classification && classes < 2) {
    throw InputError(o.paths.front() + (o.paths.size() > 1 ? " (and the other files)" : "") +
                     ": every class label is 0, but a classification needs at least 2 "
                     "classes (set \"classes\", or use \"task\": \"regression\")");
  }
  std::vector<std::shared_ptr<const Dataset>> parts;
  for (CsvFile& f : files) {
    Tensor x({f.rows, f.features});
    std::copy(f.xs.begin(), f.xs.end(), x.data());
    std::string desc = "csv " + f.path + " (" + std::to_string(f.rows) + " rows, " +
                       std::to_string(f.features) + " features, ";
    if (!o.classification) {
      Tensor t({f.rows, 1});
      std::copy(f.targets.begin(), f.targets.end(), t.data());
      parts.push_back(
          std::make_shared<InMemoryDataset>(std::move(x), std::move(t), desc + "regression)"));
    } else {
      parts.push_back(
          std::make_shared<InMemoryDataset>(std::move(x), std::move(f.labels), classes,
                                            desc + std::to_string(classes) + " classes)"));
    }
  }
  std::shared_ptr<const Dataset> all =
      parts.size() == 1 ? parts.front() : std::make_shared<ConcatDataset>(std::move(parts));
  if (o.image_shape.empty()) return all;
  try {
    return std::make_shared<ImageDataset>(all, o.image_shape);
  } catch (const InputError& e) {
    config.fail("image_shape", e.what());
  }
}

}  // namespace baton::datasets
