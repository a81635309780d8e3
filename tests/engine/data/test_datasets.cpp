// The built-in datasets plugin, loaded the way the engine loads it: through
// a Registry from the plugin directory, factories found by name.
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/data/dataset.h>
#include <baton/train/registry.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `data` gzip-compressed by zlib (gzip header: windowBits 15 + 16).
std::string gzip_bytes(const std::string& data) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    ADD_FAILURE() << "deflateInit2 failed";
    return {};
  }
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  EXPECT_EQ(rc, Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// An IDX file: magic (0, 0, type, ndims), big-endian dims, then the bytes.
std::string idx_file(unsigned char type, const std::vector<uint32_t>& dims,
                     const std::vector<unsigned char>& data) {
  std::string out{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((d >> s) & 0xFF);
  }
  out.append(data.begin(), data.end());
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Datasets : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(registry_.load_plugin_dir(BATON_PLUGIN_DIR), 1);
    std::string tmpl = (fs::temp_directory_path() / "baton_datasets_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
    return name;
  }
  std::shared_ptr<const baton::Dataset> load(const json& cfg, uint64_t seed = 7) {
    baton::ConfigNode node(cfg, "run.json", "data.train");
    baton::DatasetContext ctx{dir_, seed};
    return registry_.dataset(cfg.at("type").get<std::string>(), node)(node, ctx);
  }
  // The InputError message of loading `cfg` ("" and a failure if none).
  std::string error_of(const json& cfg) {
    try {
      load(cfg);
    } catch (const baton::InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InputError for " << cfg.dump();
    return "";
  }
  json csv(const std::string& name, const std::string& text, json extra = json::object()) {
    extra["type"] = "csv";
    extra["path"] = write(name, text);
    return extra;
  }

  baton::Registry registry_;
  std::string dir_;
};

std::vector<float> row(const baton::Dataset& d, int64_t i, int32_t* label = nullptr,
                       float* target = nullptr) {
  std::vector<float> x(static_cast<size_t>(d.features()));
  int32_t l = -1;
  float t = 0;
  d.read(i, x.data(), label ? label : &l, target ? target : &t);
  return x;
}

TEST_F(Datasets, RegistersAllThree) {
  auto names = registry_.dataset_names();
  for (const char* n : {"synthetic_classification", "csv", "idx", "text"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  bool found = false;
  for (const auto& p : registry_.plugins()) found = found || p.name == "datasets";
  EXPECT_TRUE(found);
}

TEST_F(Datasets, ShippedDigits) {
  auto d = load({{"type", "csv"},
                 {"path", std::string(BATON_SOURCE_DIR) + "/resources/datasets/digits.csv.gz"}});
  ASSERT_EQ(d->size(), 1797);
  EXPECT_EQ(d->features(), 64);
  EXPECT_EQ(d->classes(), 10);
  EXPECT_EQ(d->target_width(), 0);
  const std::vector<float> first = {0, 0, 5,  13, 9,  1,  0, 0, 0, 0, 13, 15, 10, 15, 5, 0,
                                    0, 3, 15, 2,  0,  11, 8, 0, 0, 4, 12, 0,  0,  8,  8, 0,
                                    0, 5, 8,  0,  0,  9,  8, 0, 0, 4, 11, 0,  1,  12, 7, 0,
                                    0, 2, 14, 5,  10, 12, 0, 0, 0, 0, 6,  13, 10, 0,  0, 0};
  int32_t label = -1;
  EXPECT_EQ(row(*d, 0, &label), first);
  EXPECT_EQ(label, 0);
  row(*d, 1, &label);
  EXPECT_EQ(label, 1);
  std::array<int, 10> per_class{};
  for (int64_t i = 0; i < d->size(); ++i) {
    row(*d, i, &label);
    ASSERT_TRUE(label >= 0 && label < 10);
    ++per_class[label];
  }
  for (int c : per_class) EXPECT_GT(c, 150);
}

TEST_F(Datasets, CsvHeaderAndLabelByName) {
  auto d = load(csv("h.csv", "a,\"b\",c\n1,2,3\n4,1,6\n", {{"header", true}, {"label", "b"}}));
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->features(), 2);
  EXPECT_EQ(d->classes(), 3);
  int32_t label = -1;
  EXPECT_EQ(row(*d, 0, &label), (std::vector<float>{1, 3}));
  EXPECT_EQ(label, 2);
  EXPECT_EQ(row(*d, 1, &label), (std::vector<float>{4, 6}));
  EXPECT_EQ(label, 1);

  EXPECT_NE(error_of(csv("h.csv", "a,b,c\n1,2,3\n", {{"header", true}, {"label", "foo"}}))
                .find("run.json: data.train.label: column \"foo\" not in the header (columns: a, "
                      "b, c)"),
            std::string::npos);
  std::string e = error_of(csv("h.csv", "1,2,3\n", {{"label", "b"}}));
  EXPECT_NE(e.find("data.train.label"), std::string::npos) << e;
  EXPECT_NE(e.find("header"), std::string::npos) << e;
}

TEST_F(Datasets, CsvLabelByIndex) {
  auto d = load(csv("i.csv", "1,2,3\n4,5,6\n", {{"label", -2}}));
  int32_t label = -1;
  EXPECT_EQ(row(*d, 0, &label), (std::vector<float>{1, 3}));
  EXPECT_EQ(label, 2);
  EXPECT_EQ(d->classes(), 6);
  d = load(csv("i.csv", "1,2,3\n4,5,6\n", {{"label", 0}, {"classes", 9}}));
  EXPECT_EQ(row(*d, 1, &label), (std::vector<float>{5, 6}));
  EXPECT_EQ(label, 4);
  EXPECT_EQ(d->classes(), 9);
  std::string e = error_of(csv("i.csv", "1,2,3\n", {{"label", 3}}));
  EXPECT_NE(e.find("data.train.label: column index 3 is out of range"), std::string::npos) << e;
}

TEST_F(Datasets, CsvRegression) {
  auto d = load(csv("r.csv", "0.5,1.5,-2.25\n1,2,3e2\n", {{"task", "regression"}}));
  EXPECT_EQ(d->classes(), 0);
  EXPECT_EQ(d->target_width(), 1);
  float target = 0;
  EXPECT_EQ(row(*d, 0, nullptr, &target), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(target, -2.25f);
  row(*d, 1, nullptr, &target);
  EXPECT_EQ(target, 300.0f);
  std::string e = error_of(csv("r.csv", "1,2\n", {{"task", "regression"}, {"classes", 3}}));
  EXPECT_NE(e.find("data.train.classes"), std::string::npos) << e;
}

TEST_F(Datasets, CsvGzipDelimiterCrlfAndTrailingBlankLines) {
  std::string text = "\xEF\xBB\xBFx;y;label\r\n 1.5 ; +2 ;1\r\n1e-50;-0;0.0\r\n\r\n\r\n";
  auto d = load({{"type", "csv"},
                 {"path", write("g.csv.gz", gzip_bytes(text))},
                 {"header", true},
                 {"delimiter", ";"}});
  ASSERT_EQ(d->size(), 2);
  int32_t label = -1;
  EXPECT_EQ(row(*d, 0, &label), (std::vector<float>{1.5f, 2.0f}));
  EXPECT_EQ(label, 1);
  EXPECT_EQ(row(*d, 1, &label), (std::vector<float>{0.0f, 0.0f}));  // 1e-50 underflows to 0
  EXPECT_EQ(label, 0);
  std::string e = error_of(csv("g.csv", "1,2\n", {{"delimiter", ",,"}}));
  EXPECT_NE(e.find("data.train.delimiter"), std::string::npos) << e;
}

TEST_F(Datasets, CsvMalformedNamesFileLineAndColumn) {
  struct Case {
    std::string text;
    json extra;
    std::vector<std::string> expect;
  };
  const std::map<std::string, Case> cases = {
      {"non_numeric",
       {"1,2,0\n3,abc,1\n", {}, {"bad.csv:2: column 2: expected a number, got \"abc\""}}},
      {"empty_field", {"1,2,0\n3,,1\n", {}, {"bad.csv:2: column 2", "empty field"}}},
      {"missing_column", {"1,2,0\n3,1\n", {}, {"bad.csv:2: column 3: missing", "got 2"}}},
      {"extra_column", {"1,2,0\n3,4,5,1\n", {}, {"bad.csv:2: column 4: unexpected", "got 4"}}},
      {"empty_file", {"", {}, {"bad.csv:1: no data rows"}}},
      {"header_only", {"a,b\n", {{"header", true}}, {"bad.csv:2: no data rows"}}},
      {"nan", {"1,2,0\nnan,2,1\n", {}, {"bad.csv:2: column 1", "finite", "\"nan\""}}},
      {"inf", {"1,-inf,0\n", {}, {"bad.csv:1: column 2", "finite"}}},
      {"huge", {"1,2,0\n1,1e50,1\n", {}, {"bad.csv:2: column 2", "out of float range"}}},
      {"negative_label", {"1,2,0\n1,2,-1\n", {}, {"bad.csv:2: column 3", "class label"}}},
      {"fractional_label", {"1,2,1.5\n", {}, {"bad.csv:1: column 3", "class label"}}},
      {"label_not_below_classes",
       {"1,2,3\n", {{"classes", 3}}, {"bad.csv:1: column 3", "not below"}}},
      {"header_column", {"a,b,c\n1,x,0\n", {{"header", true}}, {"bad.csv:2: column 2 (\"b\")"}}},
      {"blank_inside", {"1,2,0\n\n1,2,1\n", {}, {"bad.csv:2: blank line inside the data"}}},
      {"one_column", {"1\n2\n", {}, {"bad.csv:1:", "at least 2"}}},
      {"single_class", {"1,0\n2,0\n", {}, {"bad.csv", "at least 2 classes"}}},
  };
  for (const auto& [name, c] : cases) {
    json cfg = csv("bad.csv", c.text, c.extra.is_null() ? json::object() : c.extra);
    const std::string e = error_of(cfg);
    for (const auto& want : c.expect) {
      EXPECT_NE(e.find(want), std::string::npos) << name << ": \"" << e << "\" lacks " << want;
    }
  }
}

TEST_F(Datasets, CsvConfigAndFileErrors) {
  std::string e = error_of(csv("ok.csv", "1,0\n2,1\n", {{"colour", "red"}}));
  EXPECT_NE(e.find("data.train.colour"), std::string::npos) << e;
  e = error_of({{"type", "csv"}, {"path", "nope.csv"}});
  EXPECT_NE(e.find("data.train.path"), std::string::npos) << e;
  EXPECT_NE(e.find("nope.csv"), std::string::npos) << e;
  e = error_of({{"type", "csv"}});
  EXPECT_NE(e.find("data.train.path"), std::string::npos) << e;
}

// Several files: a glob (every match, in name order) or a list. Each file
// is a file for the FILE shard policy; the classes are over all of them.
TEST_F(Datasets, CsvTakesAGlobOrAListOfFiles) {
  write("part-2.csv", "5,0\n6,0\n");  // only class 0 here
  write("part-0.csv", "1,1\n2,2\n");
  write("part-1.csv.gz", gzip_bytes("3,0\n"));
  write("part-3.csv", "7,1\n8,0\n9,1\n");
  write("other.csv", "0,0\n");
  auto d = load({{"type", "csv"}, {"path", "part-*.csv*"}});
  ASSERT_EQ(d->size(), 8);
  EXPECT_EQ(d->num_files(), 4);
  EXPECT_EQ(d->classes(), 3);
  // Name order: part-0, part-1, part-2, part-3.
  const std::vector<float> firsts = {1, 2, 3, 5, 6, 7, 8, 9};
  const std::vector<int64_t> files = {0, 0, 1, 2, 2, 3, 3, 3};
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(row(*d, i)[0], firsts[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(d->file_of(i), files[static_cast<size_t>(i)]) << i;
  }
  auto listed = load({{"type", "csv"}, {"path", {"part-3.csv", "part-0.csv"}}});
  ASSERT_EQ(listed->size(), 5);
  EXPECT_EQ(listed->num_files(), 2);
  EXPECT_EQ(row(*listed, 0)[0], 7.0f);
  EXPECT_EQ(listed->file_of(4), 1);

  std::string e = error_of({{"type", "csv"}, {"path", "nothing-*.csv"}});
  EXPECT_NE(e.find("data.train.path: no file matches"), std::string::npos) << e;
  e = error_of({{"type", "csv"}, {"path", {"part-0.csv", "missing.csv"}}});
  EXPECT_NE(e.find("data.train.path[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("missing.csv"), std::string::npos) << e;
  e = error_of({{"type", "csv"}, {"path", json::array()}});
  EXPECT_NE(e.find("data.train.path"), std::string::npos) << e;
  write("wide.csv", "1,2,0\n");
  e = error_of({{"type", "csv"}, {"path", {"part-0.csv", "wide.csv"}}});
  EXPECT_NE(e.find("wide.csv: 2 feature columns, but"), std::string::npos) << e;
}

TEST_F(Datasets, IdxPairsImageAndLabelFiles) {
  write("a-img.idx", idx_file(0x08, {2, 1, 2}, {1, 2, 3, 4}));
  write("a-lab.idx", idx_file(0x08, {2}, {5, 6}));
  write("b-img.idx", idx_file(0x08, {1, 1, 2}, {9, 9}));
  write("b-lab.idx", idx_file(0x08, {1}, {7}));
  auto d = load({{"type", "idx"}, {"images", "*-img.idx"}, {"labels", "*-lab.idx"}});
  ASSERT_EQ(d->size(), 3);
  EXPECT_EQ(d->num_files(), 2);
  int32_t label = -1;
  row(*d, 2, &label);
  EXPECT_EQ(label, 7);
  EXPECT_EQ(d->file_of(2), 1);
  const std::string e =
      error_of({{"type", "idx"}, {"images", "*-img.idx"}, {"labels", "a-lab.idx"}});
  EXPECT_NE(e.find("data.train.labels: 1 label file(s) for 2 image file(s)"), std::string::npos)
      << e;
}

TEST_F(Datasets, CsvCorruptGzip) {
  // A wrong CRC: the data decompresses but fails the check at the end.
  std::string gz = gzip_bytes("1,2,0\n3,4,1\n");
  gz[gz.size() - 8] ^= 0x55;
  std::string e = error_of({{"type", "csv"}, {"path", write("crc.csv.gz", gz)}});
  EXPECT_NE(e.find("crc.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("gzip"), std::string::npos) << e;

  // The shipped file cut in half, and with its compressed body scrambled.
  const std::string digits =
      read_bytes(std::string(BATON_SOURCE_DIR) + "/resources/datasets/digits.csv.gz");
  ASSERT_GT(digits.size(), 1000u);
  e = error_of(
      {{"type", "csv"}, {"path", write("half.csv.gz", digits.substr(0, digits.size() / 2))}});
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  // The line named is where the data stops, not the start of the file.
  const size_t at = e.find("half.csv.gz:");
  ASSERT_NE(at, std::string::npos) << e;
  EXPECT_GT(std::atoi(e.c_str() + at + 12), 100) << e;
  std::string scrambled = digits;
  for (size_t i = 100; i < 400; ++i) scrambled[i] = static_cast<char>(scrambled[i] * 31 + 7);
  e = error_of({{"type", "csv"}, {"path", write("bad.csv.gz", scrambled)}});
  EXPECT_NE(e.find("bad.csv.gz:"), std::string::npos) << e;
}

TEST_F(Datasets, IdxReadsPlainAndGzip) {
  const std::vector<unsigned char> pixels = {0, 255, 51, 102, 1, 2, 3, 4, 9, 8, 7, 6};
  write("img.idx", idx_file(0x08, {3, 2, 2}, pixels));
  write("img.idx.gz", gzip_bytes(idx_file(0x08, {3, 2, 2}, pixels)));
  write("lab.idx", idx_file(0x08, {3}, {7, 0, 9}));
  for (const char* images : {"img.idx", "img.idx.gz"}) {
    auto d = load({{"type", "idx"}, {"images", images}, {"labels", "lab.idx"}});
    ASSERT_EQ(d->size(), 3);
    EXPECT_EQ(d->features(), 4);
    EXPECT_EQ(d->classes(), 10);
    int32_t label = -1;
    EXPECT_EQ(row(*d, 0, &label), (std::vector<float>{0.0f, 1.0f, 51 / 255.0f, 102 / 255.0f}));
    EXPECT_EQ(label, 7);
    row(*d, 2, &label);
    EXPECT_EQ(label, 9);
  }
  auto raw = load({{"type", "idx"},
                   {"images", "img.idx"},
                   {"labels", "lab.idx"},
                   {"normalize", false},
                   {"classes", 12}});
  EXPECT_EQ(row(*raw, 2), (std::vector<float>{9, 8, 7, 6}));
  EXPECT_EQ(raw->classes(), 12);
}

TEST_F(Datasets, IdxErrors) {
  const std::vector<unsigned char> pixels(12, 1);
  write("img.idx", idx_file(0x08, {3, 2, 2}, pixels));
  write("lab.idx", idx_file(0x08, {3}, {1, 2, 3}));
  auto err = [&](const std::string& images, const std::string& labels,
                 json extra = json::object()) {
    extra["type"] = "idx";
    extra["images"] = images;
    extra["labels"] = labels;
    return error_of(extra);
  };
  auto expect_has = [](const std::string& e, std::initializer_list<const char*> parts) {
    for (const char* p : parts) EXPECT_NE(e.find(p), std::string::npos) << e << " lacks " << p;
  };
  write("magic.idx", "PK\x03\x04 not idx at all");
  expect_has(err("magic.idx", "lab.idx"), {"magic.idx", "magic number 0x504B0304", "0x00000803"});
  expect_has(err("img.idx", "img.idx"), {"img.idx", "0x00000801"});  // images given as labels
  write("short.idx", idx_file(0x08, {3, 2, 2}, std::vector<unsigned char>(10, 1)));
  expect_has(err("short.idx", "lab.idx"), {"short.idx", "truncated", "needs 28 bytes", "has 26"});
  const std::string gz = gzip_bytes(idx_file(0x08, {3, 2, 2}, pixels));
  write("cut.idx.gz", gz.substr(0, gz.size() - 10));
  expect_has(err("cut.idx.gz", "lab.idx"), {"cut.idx.gz", "truncated"});
  write("long.idx", idx_file(0x08, {3, 2, 2}, std::vector<unsigned char>(13, 1)));
  expect_has(err("long.idx", "lab.idx"), {"long.idx", "1 bytes after the data"});
  write("lab2.idx", idx_file(0x08, {2}, {1, 2}));
  expect_has(err("img.idx", "lab2.idx"), {"img.idx has 3 images", "lab2.idx has 2 labels"});
  write("lab10.idx", idx_file(0x08, {3}, {1, 10, 3}));
  expect_has(err("img.idx", "lab10.idx"), {"lab10.idx", "label 10 of item 1", "not below"});
  write("float.idx", idx_file(0x0D, {3, 1}, std::vector<unsigned char>(12, 0)));
  expect_has(err("float.idx", "lab.idx"), {"float.idx", "0x0D (float32) is not supported"});
  expect_has(err("img.idx", "missing.idx"), {"data.train.labels", "missing.idx"});
  expect_has(err("img.idx", "lab.idx", {{"normalise", true}}), {"data.train.normalise"});
}

TEST_F(Datasets, SyntheticDeterministicAndBalanced) {
  json cfg = {{"type", "synthetic_classification"},
              {"samples", 1000},
              {"features", 5},
              {"classes", 4},
              {"seed", 42}};
  auto a = load(cfg), b = load(cfg);
  cfg["seed"] = 43;
  auto c = load(cfg);
  ASSERT_EQ(a->size(), 1000);
  EXPECT_EQ(a->features(), 5);
  EXPECT_EQ(a->classes(), 4);
  std::array<int, 4> per_class{};
  bool differs = false;
  for (int64_t i = 0; i < a->size(); ++i) {
    int32_t la = -1, lb = -1, lc = -1;
    auto ra = row(*a, i, &la), rb = row(*b, i, &lb), rc = row(*c, i, &lc);
    EXPECT_EQ(ra, rb);
    EXPECT_EQ(la, lb);
    differs = differs || ra != rc;
    ++per_class.at(static_cast<size_t>(la));
  }
  EXPECT_TRUE(differs);
  for (int n : per_class) EXPECT_EQ(n, 250);
  // Shuffled: not simply 0, 1, 2, 3, 0, 1, ...
  int in_pattern = 0;
  for (int64_t i = 0; i < 40; ++i) {
    int32_t l = -1;
    row(*a, i, &l);
    in_pattern += l == i % 4;
  }
  EXPECT_LT(in_pattern, 40);
}

TEST_F(Datasets, SyntheticImagesHaveTheirShapeClassesAndSeed) {
  json cfg = {{"type", "synthetic_images"},
              {"image_shape", {3, 8, 6}},
              {"samples", 50},
              {"classes", 5},
              {"seed", 3}};
  auto a = load(cfg), b = load(cfg);
  EXPECT_EQ(a->image_shape(), (std::vector<int64_t>{3, 8, 6}));
  EXPECT_EQ(a->features(), 3 * 8 * 6);
  EXPECT_EQ(a->classes(), 5);
  ASSERT_EQ(a->size(), 50);
  std::array<int, 5> per_class{};
  for (int64_t i = 0; i < a->size(); ++i) {
    int32_t la = -1, lb = -1;
    EXPECT_EQ(row(*a, i, &la), row(*b, i, &lb));
    EXPECT_EQ(la, lb);
    ++per_class.at(static_cast<size_t>(la));
  }
  for (int n : per_class) EXPECT_EQ(n, 10);
  EXPECT_NE(a->describe().find("3x8x6"), std::string::npos) << a->describe();
  auto d = load({{"type", "synthetic_images"}});
  EXPECT_EQ(d->image_shape(), (std::vector<int64_t>{3, 32, 32}));

  const std::string two = error_of({{"type", "synthetic_images"}, {"image_shape", {8, 8}}});
  EXPECT_NE(two.find("data.train.image_shape"), std::string::npos) << two;
  EXPECT_NE(two.find("[C, H, W]"), std::string::npos) << two;
  const std::string zero = error_of({{"type", "synthetic_images"}, {"image_shape", {3, 0, 8}}});
  EXPECT_NE(zero.find("data.train.image_shape"), std::string::npos) << zero;
  const std::string big =
      error_of({{"type", "synthetic_images"}, {"image_shape", {3, 4096, 4096}}, {"samples", 100}});
  EXPECT_NE(big.find("data.train.samples"), std::string::npos) << big;
  const std::string unknown = error_of({{"type", "synthetic_images"}, {"features", 10}});
  EXPECT_NE(unknown.find("features"), std::string::npos) << unknown;
}

TEST_F(Datasets, SyntheticDefaultsSeedAndClusters) {
  auto d = load({{"type", "synthetic_classification"}}, 7);
  EXPECT_EQ(d->size(), 1024);
  EXPECT_EQ(d->features(), 20);
  EXPECT_EQ(d->classes(), 4);
  auto same = load({{"type", "synthetic_classification"}, {"seed", 7}}, 99);
  EXPECT_EQ(row(*d, 5), row(*same, 5));  // no "seed": the context seed

  // Well separated clusters: each sample is nearest to its own class mean.
  auto s = load({{"type", "synthetic_classification"},
                 {"separation", 8.0},
                 {"spread", 1.0},
                 {"features", 4},
                 {"samples", 400}});
  std::vector<std::vector<double>> mean(4, std::vector<double>(4, 0.0));
  for (int64_t i = 0; i < s->size(); ++i) {
    int32_t l = -1;
    auto x = row(*s, i, &l);
    for (int f = 0; f < 4; ++f) mean[l][f] += x[f] / 100.0;
  }
  int correct = 0;
  for (int64_t i = 0; i < s->size(); ++i) {
    int32_t l = -1;
    auto x = row(*s, i, &l);
    int best = 0;
    double best_d = 1e300;
    for (int c = 0; c < 4; ++c) {
      double dist = 0;
      for (int f = 0; f < 4; ++f) dist += (x[f] - mean[c][f]) * (x[f] - mean[c][f]);
      if (dist < best_d) best_d = dist, best = c;
    }
    correct += best == l;
  }
  EXPECT_GT(correct, 380);

  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{{"classes", 1},
                                                                            {"features", 0},
                                                                            {"samples", 0},
                                                                            {"spread", 0.0},
                                                                            {"separation", -1.0},
                                                                            {"seed", -3},
                                                                            {"noise_level", 1}}) {
    std::string e = error_of({{"type", "synthetic_classification"}, {key, value}});
    EXPECT_NE(e.find("data.train." + key), std::string::npos) << e;
  }
}

}  // namespace

// Text: byte-level tokens (any byte is a token, UTF-8 or not), windows of
// `context` tokens starting every `context` bytes, labels the next byte at
// each position; windows stay inside their file; each file is a file for
// the FILE policy; the held-out split takes the last windows in order.
TEST_F(Datasets, TextWindowsLabelsFilesAndSplit) {
  write("a.txt", "abcdefghij");  // 10 bytes: (10 - 1) / 4 = 2 windows
  write("b.txt.gz",
        gzip_bytes(std::string("\xff\x00xyz0123", 9)));  // any bytes, gzipped: 2 windows
  auto d = load({{"type", "text"}, {"path", json::array({"a.txt", "b.txt.gz"})}, {"context", 4}});
  ASSERT_EQ(d->size(), 4);
  EXPECT_EQ(d->features(), 4);
  EXPECT_EQ(d->labels_per_sample(), 4);
  EXPECT_EQ(d->classes(), 256);
  EXPECT_TRUE(d->token_features());
  EXPECT_EQ(d->num_files(), 2);
  std::vector<float> x(4);
  std::vector<int32_t> y(4);
  d->read(1, x.data(), y.data(), nullptr);
  EXPECT_EQ(x, (std::vector<float>{'e', 'f', 'g', 'h'}));
  EXPECT_EQ(y, (std::vector<int32_t>{'f', 'g', 'h', 'i'}));
  EXPECT_EQ(d->file_of(1), 0);
  d->read(2, x.data(), y.data(), nullptr);  // the second file's first window
  EXPECT_EQ(x, (std::vector<float>{255, 0, 'x', 'y'}));
  EXPECT_EQ(y, (std::vector<int32_t>{0, 'x', 'y', 'z'}));
  EXPECT_EQ(d->file_of(2), 1);
  EXPECT_NE(d->describe().find("vocabulary 256"), std::string::npos) << d->describe();

  // Held out by position: the last windows, in order.
  const baton::Split split = baton::split_dataset(d, 0.5, 3);
  ASSERT_EQ(split.validation->size(), 2);
  split.validation->read(0, x.data(), y.data(), nullptr);
  EXPECT_EQ(x[0], 255.0f);
  split.validation->read(1, x.data(), y.data(), nullptr);
  EXPECT_EQ(x[0], 'z');
}

TEST_F(Datasets, TextErrorsNameTheKeyAndTheFile) {
  write("short.txt", "tiny");
  std::string e = error_of({{"type", "text"}, {"path", "short.txt"}, {"context", 8}});
  EXPECT_NE(e.find("data.train.context"), std::string::npos) << e;
  EXPECT_NE(e.find("short.txt has 4"), std::string::npos) << e;
  e = error_of({{"type", "text"}, {"path", "short.txt"}, {"context", 2}, {"tokenizer", "bpe"}});
  EXPECT_NE(e.find("data.train.tokenizer"), std::string::npos) << e;
  e = error_of({{"type", "text"}, {"path", "short.txt"}, {"contxt", 2}});
  EXPECT_NE(e.find("data.train.contxt"), std::string::npos) << e;
  e = error_of({{"type", "text"}, {"path", "none.txt"}});
  EXPECT_NE(e.find("data.train.path"), std::string::npos) << e;
}
