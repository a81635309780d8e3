// The one CSV writer (RFC 4180 fields) every export shares: `baton history
// export --format csv` and the studio's "Export CSV...". A field holding a
// comma, a double quote, CR or LF is quoted, its quotes doubled; numbers
// have 17 significant digits (a double reads back exactly), NaN and the
// infinities are the words nan, inf, -inf. Lines end in "\n".
#pragma once

#include <string>
#include <string_view>

namespace baton::csv {

std::string field(std::string_view text);
std::string number(double v);

// Appends `text` as the next field of `line` (a comma before all but the
// first).
inline void add(std::string& line, std::string_view text) {
  if (!line.empty()) line += ',';
  line += field(text);
}
inline void add_number(std::string& line, double v) {
  if (!line.empty()) line += ',';
  line += number(v);
}

}  // namespace baton::csv
