// The shared CSV writer: RFC 4180 quoting, and numbers that read back
// exactly (the studio wrote 10 digits and unquoted run ids).
#include <baton/core/csv.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace baton {
namespace {

TEST(Csv, FieldsThatNeedItAreQuotedWithTheirQuotesDoubled) {
  EXPECT_EQ(csv::field("loss"), "loss");
  EXPECT_EQ(csv::field(""), "");
  EXPECT_EQ(csv::field("a,b\"c"), "\"a,b\"\"c\"");
  EXPECT_EQ(csv::field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv::field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv::field("\""), "\"\"\"\"");
  std::string line;
  csv::add(line, "run,1");
  csv::add_number(line, 0.5);
  csv::add(line, "x");
  EXPECT_EQ(line, "\"run,1\",0.5,x");
}

TEST(Csv, NumbersReadBackExactly) {
  for (double v : {0.1 + 0.2, 1.0 / 3.0, 1e-300, -2.5e17, 123456789.123456789,
                   std::numeric_limits<double>::denorm_min()}) {
    const std::string text = csv::number(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
  EXPECT_EQ(csv::number(0.30000000000000004), "0.30000000000000004");
  EXPECT_EQ(csv::number(std::nan("")), "nan");
  EXPECT_EQ(csv::number(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(csv::number(-std::numeric_limits<double>::infinity()), "-inf");
}

}  // namespace
}  // namespace baton
