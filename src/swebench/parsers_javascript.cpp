// swebench's JavaScript log parsers (harness/log_parsers/javascript.py): jest, vitest, mocha,
// karma, TAP and the per-repository formats. Each follows its Python original step by step with
// py_text's str and re semantics, so odd input gives what swebench gives, raising included.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

namespace rex::swebench::parsers {

namespace javascript_detail {

// --- text helpers -------------------------------------------------------------------------------

// One suite level of an indented test tree: its title and its indentation in code points.
struct SuiteLevel {
  std::string name;
  std::size_t indent = 0;
};
using Suite = std::vector<SuiteLevel>;

// len(line) - len(line.lstrip()): leading whitespace in code points.
std::size_t indent_of(std::string_view line) {
  return py::length(line.substr(0, line.size() - py::lstrip(line).size()));
}

// The suite bookkeeping the indentation-driven parsers share: drop the levels at or below this
// line's indentation, then open the line as a new level.
void nest(Suite& suite, std::string_view line, std::size_t indent) {
  while (!suite.empty() && suite.back().indent >= indent)
    suite.pop_back();
  suite.push_back({std::string(py::strip(line)), indent});
}

// sep.join([level names..., test]).
std::string suite_name(const Suite& suite, std::string_view test, std::string_view sep) {
  std::string out;
  for (const SuiteLevel& level : suite) {
    out += level.name;
    out += sep;
  }
  out += test;
  return out;
}

// s.split(sep)[-1] (sep never overlaps itself in the callers, so the last occurrence decides).
std::string_view after_last(std::string_view s, std::string_view sep) {
  const std::size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// s.rsplit(sep, 1)[0].
std::string_view before_last(std::string_view s, std::string_view sep) {
  const std::size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(0, at);
}

// s.split(sep, 1)[-1].
std::string_view after_first(std::string_view s, std::string_view sep) {
  const std::size_t at = s.find(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// re.split(pattern, s)[0] for a pattern that never matches empty: s up to the first match.
std::string_view before_match(const py::Regex& pattern, std::string_view s) {
  const std::optional<py::Match> m = pattern.search(s);
  return m ? s.substr(0, m->start()) : s;
}

// swebench.utils.ansi_escape.
std::string ansi_escape(std::string_view text) {
  static const py::Regex ansi(R"(\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~]))");
  return ansi.sub("", text);
}

// The code point at s[i] (valid UTF-8), advancing i past it.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i++]);
  if (lead < 0x80)
    return lead;
  const int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
  char32_t c = lead & (0x3F >> extra);
  for (int k = 0; k < extra && i < s.size(); ++k)
    c = (c << 6) | (static_cast<unsigned char>(s[i++]) & 0x3F);
  return c;
}

bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

// The double nearest an unsigned decimal literal ("12", "1.5e-3", ".5", "5."): beyond the range
// infinity, below it zero, as Python's float() and json give.
double decimal_value(std::string_view literal) {
  double value = 0;
  const auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), value);
  if (ec != std::errc::result_out_of_range)
    return value;
  // Out of range: the decimal exponent of the first significant digit tells which way.
  const std::size_t e = literal.find_first_of("eE");
  const std::string_view mantissa = literal.substr(0, e);
  long long magnitude = 0;
  if (e != std::string_view::npos) {
    std::string_view exponent = literal.substr(e + 1);
    const bool minus = exponent.starts_with('-');
    if (minus || exponent.starts_with('+'))
      exponent.remove_prefix(1);
    for (const char c : exponent)
      magnitude = std::min<long long>(magnitude * 10 + (c - '0'), 1'000'000'000);
    if (minus)
      magnitude = -magnitude;
  }
  const std::size_t point = std::min(mantissa.find('.'), mantissa.size());
  const std::size_t first = mantissa.find_first_not_of("0.");
  if (first == std::string_view::npos)
    return 0;
  magnitude += first < point ? static_cast<long long>(point - first)
                             : -static_cast<long long>(first - point);
  return magnitude > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// Python's float(str); nullopt where it raises ValueError. Unicode whitespace and decimal digits
// count as their ASCII forms, ASCII whitespace around is dropped, single underscores may sit
// between digits, and inf/infinity/nan are taken in any case.
std::optional<double> py_float(std::string_view s) {
  std::string ascii;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t from = i;
    const char32_t c = next_code_point(s, i);
    if (c < 127) {
      ascii += static_cast<char>(c);
    } else if (py::is_space(c)) {
      ascii += ' ';
    } else {
      const std::string_view one = s.substr(from, i - from);
      if (!py::isdecimal(one))
        return std::nullopt;
      ascii += static_cast<char>('0' + *py::to_int(one));
    }
  }
  constexpr std::string_view ascii_space = " \t\n\v\f\r";
  const std::size_t first = ascii.find_first_not_of(ascii_space);
  if (first == std::string::npos)
    return std::nullopt;
  std::string_view text(ascii);
  text = text.substr(first, text.find_last_not_of(ascii_space) - first + 1);

  std::string plain;
  char prev = '\0';
  for (const char c : text) {
    if (c == '_') {
      if (!is_ascii_digit(prev))
        return std::nullopt;
    } else {
      if (prev == '_' && !is_ascii_digit(c))
        return std::nullopt;
      plain += c;
    }
    prev = c;
  }
  if (prev == '_')
    return std::nullopt;

  std::string_view body(plain);
  const bool negative = body.starts_with('-');
  if (body.starts_with('-') || body.starts_with('+'))
    body.remove_prefix(1);
  std::string word(body);
  for (char& c : word)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  double value = 0;
  if (word == "inf" || word == "infinity") {
    value = std::numeric_limits<double>::infinity();
  } else if (word == "nan") {
    value = std::numeric_limits<double>::quiet_NaN();
  } else {
    // digits [. digits] or . digits, then an optional exponent with digits.
    std::size_t i = 0;
    std::size_t digits = 0;
    while (i < body.size() && is_ascii_digit(body[i]))
      ++i, ++digits;
    if (i < body.size() && body[i] == '.') {
      ++i;
      while (i < body.size() && is_ascii_digit(body[i]))
        ++i, ++digits;
    }
    if (digits == 0)
      return std::nullopt;
    if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
      ++i;
      if (i < body.size() && (body[i] == '+' || body[i] == '-'))
        ++i;
      const std::size_t exponent = i;
      while (i < body.size() && is_ascii_digit(body[i]))
        ++i;
      if (i == exponent)
        return std::nullopt;
    }
    if (i != body.size())
      return std::nullopt;
    value = decimal_value(body);
  }
  return negative ? -value : value;
}

// --- json.loads ---------------------------------------------------------------------------------

// A parsed JSON value, as much as parse_log_prismjs looks at.
struct JsonValue {
  enum class Kind { null, boolean, integer, real, string, array, object };
  Kind kind = Kind::null;
  std::string text;               // a string's value, a number's literal, "True" or "False"
  std::vector<JsonValue> items;   // an array's items, an object's values
  std::vector<std::string> keys;  // an object's keys beside its values

  // obj[key]: the last of repeated keys wins, as in a dict built from the pairs.
  const JsonValue* member(std::string_view key) const {
    for (std::size_t i = keys.size(); i-- > 0;)
      if (keys[i] == key)
        return &items[i];
    return nullptr;
  }
};

// Python's json.loads over UTF-8 text: the strict grammar plus NaN, Infinity and -Infinity, only
// " \t\n\r" between tokens, no raw control characters in strings, integers of at most 4,300
// digits (int()'s limit) and the nesting Python's recursion limit allows.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  JsonValue document() {
    skip_space();
    JsonValue v = value(0);
    skip_space();
    if (pos_ != text_.size())
      fail("Extra data");
    return v;
  }

 private:
  // Nested containers Python decodes before RecursionError: its limit of 1000 frames less those
  // above the parser (992 under tests/swebench/parse_logs.py; a deeper caller gets fewer).
  static constexpr int max_depth = 992;
  static constexpr std::size_t max_int_digits = 4300;

  [[noreturn]] void fail(std::string_view what) const {
    throw LogParserError(fmt::format("JSONDecodeError: {} (byte {})", what, pos_));
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool take(std::string_view word) {
    if (!text_.substr(pos_).starts_with(word))
      return false;
    pos_ += word.size();
    return true;
  }

  JsonValue value(int depth) {
    JsonValue v;
    if (pos_ >= text_.size())
      fail("Expecting value");
    switch (text_[pos_]) {
      case '"':
        v.kind = JsonValue::Kind::string;
        v.text = string();
        return v;
      case '{':
        if (depth >= max_depth)
          throw LogParserError("RecursionError while decoding a JSON object");
        return object(depth + 1);
      case '[':
        if (depth >= max_depth)
          throw LogParserError("RecursionError while decoding a JSON array");
        return array(depth + 1);
      default:
        break;
    }
    if (take("null"))
      return v;
    for (const std::string_view word : {"true", "false"}) {
      if (take(word)) {
        v.kind = JsonValue::Kind::boolean;
        v.text = word == "true" ? "True" : "False";
        return v;
      }
    }
    for (const std::string_view word : {"NaN", "Infinity", "-Infinity"}) {
      if (take(word)) {
        v.kind = JsonValue::Kind::real;
        v.text = word;
        return v;
      }
    }
    const std::size_t start = pos_;
    v.kind = number() ? JsonValue::Kind::real : JsonValue::Kind::integer;
    v.text = text_.substr(start, pos_ - start);
    return v;
  }

  // A number at pos_, moved past; whether it is a float (has a fraction or an exponent).
  bool number() {
    const std::size_t start = pos_;
    if (at('-'))
      ++pos_;
    const std::size_t int_start = pos_;
    if (pos_ < text_.size() && text_[pos_] >= '1' && text_[pos_] <= '9') {
      while (pos_ < text_.size() && is_ascii_digit(text_[pos_]))
        ++pos_;
    } else if (at('0')) {
      ++pos_;
    } else {
      pos_ = start;
      fail("Expecting value");
    }
    const std::size_t int_digits = pos_ - int_start;
    bool is_float = false;
    if (at('.') && pos_ + 1 < text_.size() && is_ascii_digit(text_[pos_ + 1])) {
      pos_ += 2;
      while (pos_ < text_.size() && is_ascii_digit(text_[pos_]))
        ++pos_;
      is_float = true;
    }
    if (at('e') || at('E')) {
      const std::size_t mark = pos_++;
      if (at('+') || at('-'))
        ++pos_;
      const std::size_t digits = pos_;
      while (pos_ < text_.size() && is_ascii_digit(text_[pos_]))
        ++pos_;
      if (pos_ > digits)
        is_float = true;
      else
        pos_ = mark;
    }
    if (!is_float && int_digits > max_int_digits)
      fail("Exceeds the limit (4300 digits) for integer string conversion");
    return is_float;
  }

  // Four hex digits at pos_ as a code unit, or nullopt.
  std::optional<char32_t> hex4(std::size_t at) const {
    char32_t c = 0;
    for (std::size_t i = at; i < at + 4; ++i) {
      const char h = text_[i];
      c <<= 4;
      if (h >= '0' && h <= '9')
        c |= static_cast<char32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        c |= static_cast<char32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        c |= static_cast<char32_t>(h - 'A' + 10);
      else
        return std::nullopt;
    }
    return c;
  }

  static void append_utf8(std::string& out, char32_t c) {
    // A lone surrogate has no UTF-8 form.
    py::append_utf8(out, c >= 0xD800 && c <= 0xDFFF ? char32_t{0xFFFD} : c);
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (pos_ >= text_.size())
        fail("Unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        fail("Invalid control character");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= text_.size())
        fail("Unterminated string");
      const char e = text_[pos_];
      if (e != 'u') {
        constexpr std::string_view from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
        const std::size_t k = from.find(e);
        if (k == std::string_view::npos)
          fail("Invalid \\escape");
        out += to[k];
        ++pos_;
        continue;
      }
      // \uXXXX needs its four digits and one more character after them.
      if (pos_ + 5 >= text_.size())
        fail("Invalid \\uXXXX escape");
      std::optional<char32_t> unit = hex4(pos_ + 1);
      if (!unit)
        fail("Invalid \\uXXXX escape");
      pos_ += 5;
      char32_t code = *unit;
      // A high surrogate joins a following \u low surrogate when six more characters and one
      // after them remain (bytes and characters agree there: the six are ASCII).
      if (code >= 0xD800 && code <= 0xDBFF && pos_ + 6 < text_.size() &&
          text_.substr(pos_, 2) == "\\u") {
        const std::optional<char32_t> low = hex4(pos_ + 2);
        if (!low)
          fail("Invalid \\uXXXX escape");
        if (*low >= 0xDC00 && *low <= 0xDFFF) {
          code = 0x10000 + ((code - 0xD800) << 10) + (*low - 0xDC00);
          pos_ += 6;
        }
      }
      append_utf8(out, code);
    }
  }

  JsonValue object(int depth) {
    JsonValue v;
    v.kind = JsonValue::Kind::object;
    ++pos_;
    skip_space();
    if (at('}')) {
      ++pos_;
      return v;
    }
    for (;;) {
      if (!at('"'))
        fail("Expecting property name enclosed in double quotes");
      std::string key = string();
      skip_space();
      if (!at(':'))
        fail("Expecting ':' delimiter");
      ++pos_;
      skip_space();
      JsonValue item = value(depth);
      v.keys.push_back(std::move(key));
      v.items.push_back(std::move(item));
      skip_space();
      if (at('}')) {
        ++pos_;
        return v;
      }
      if (!at(','))
        fail("Expecting ',' delimiter");
      ++pos_;
      skip_space();
    }
  }

  JsonValue array(int depth) {
    JsonValue v;
    v.kind = JsonValue::Kind::array;
    ++pos_;
    skip_space();
    if (at(']')) {
      ++pos_;
      return v;
    }
    for (;;) {
      v.items.push_back(value(depth));
      skip_space();
      if (at(']')) {
        ++pos_;
        return v;
      }
      if (!at(','))
        fail("Expecting ',' delimiter");
      ++pos_;
      skip_space();
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// repr() of a float: the shortest digits that read back, positional from 1e-4 up to 1e16,
// otherwise with an exponent of at least two digits.
std::string float_repr(double x) {
  if (std::isnan(x))
    return "nan";
  if (std::isinf(x))
    return x > 0 ? "inf" : "-inf";
  std::array<char, 64> buf{};
  const auto done =
      std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::scientific);
  const std::string_view sci(buf.data(), static_cast<std::size_t>(done.ptr - buf.data()));
  const std::size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  const bool negative = mantissa.starts_with('-');
  if (negative)
    mantissa.remove_prefix(1);
  std::string digits;
  for (const char c : mantissa)
    if (c != '.')
      digits += c;
  int exponent = 0;
  std::string_view exp_text = sci.substr(e + 1);
  if (exp_text.starts_with('+'))
    exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
  const int point = exponent + 1;  // digits before the decimal point
  std::string out = negative ? "-" : "";
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (static_cast<std::size_t>(point) >= digits.size()) {
      out += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." +
             digits.substr(static_cast<std::size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1)
    out += "." + digits.substr(1);
  return out + fmt::format("e{}{:02}", exponent < 0 ? '-' : '+', std::abs(exponent));
}

// The map parse_log_prismjs builds, whose keys are whatever the report's titles are: strings,
// or numbers, booleans and null, which a dict keys by value (1, 1.0 and true are one key, named
// as first seen) and tests/swebench/parse_logs.py prints by repr().
class TitleMap {
 public:
  void set(const JsonValue& title, std::string_view status) {
    auto [identity, name] = key(title);
    if (const auto it = index_.find(identity); it != index_.end()) {
      entries_[it->second].second = std::string(status);
      return;
    }
    index_.emplace(std::move(identity), entries_.size());
    entries_.emplace_back(std::move(name), std::string(status));
  }

  // As a StatusMap (a string title and a number that prints the same become one entry).
  StatusMap statuses() const {
    StatusMap map;
    for (const auto& [name, status] : entries_)
      map.set(name, status);
    return map;
  }

 private:
  // The key's identity (equal for keys a dict takes as one) and its printed name.
  static std::pair<std::string, std::string> key(const JsonValue& title) {
    switch (title.kind) {
      case JsonValue::Kind::string:
        return {"s" + title.text, title.text};
      case JsonValue::Kind::null:
        return {"None", "None"};
      case JsonValue::Kind::boolean:
        return {title.text == "True" ? "n1" : "n0", title.text};
      case JsonValue::Kind::integer: {
        const std::string digits = title.text == "-0" ? "0" : title.text;
        return {"n" + digits, digits};
      }
      default:
        break;
    }
    double x = 0;
    if (title.text == "NaN") {
      x = std::numeric_limits<double>::quiet_NaN();
    } else if (title.text.ends_with("Infinity")) {
      x = title.text.starts_with('-') ? -std::numeric_limits<double>::infinity()
                                      : std::numeric_limits<double>::infinity();
    } else {
      std::string_view literal(title.text);
      const bool negative = literal.starts_with('-');
      if (negative)
        literal.remove_prefix(1);
      x = decimal_value(literal);
      x = negative ? -x : x;
    }
    std::string identity;
    if (std::isnan(x)) {
      identity = "nnan";  // json's one NaN object: every NaN title is the same key
    } else if (std::isinf(x)) {
      identity = x > 0 ? "ninf" : "n-inf";
    } else if (x == std::trunc(x)) {
      // An integral float equals the int of the same value: both key by its exact digits.
      std::array<char, 400> buf{};
      const auto done =
          std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::fixed, 0);
      identity.assign(buf.data(), done.ptr);
      if (identity == "-0")
        identity = "0";
      identity = "n" + identity;
    } else {
      identity = "f" + float_repr(x);
    }
    return {std::move(identity), float_repr(x)};
  }

  std::vector<std::pair<std::string, std::string>> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// `for test in results[key]: map[test["fullTitle"]] = status`, failing where Python does: a
// missing key, something not iterable, items that are not dicts or lack the title, unhashable
// titles.
void record_titles(TitleMap& map, const JsonValue& results, std::string_view key,
                   std::string_view status) {
  const JsonValue* list = results.member(key);
  if (!list)
    throw LogParserError(fmt::format("KeyError: '{}'", key));
  switch (list->kind) {
    case JsonValue::Kind::array:
      break;
    case JsonValue::Kind::object:
      if (!list->items.empty())
        throw LogParserError("TypeError: string indices must be integers");
      return;
    case JsonValue::Kind::string:
      if (!list->text.empty())
        throw LogParserError("TypeError: string indices must be integers");
      return;
    default:
      throw LogParserError(fmt::format("TypeError: '{}' is not iterable", key));
  }
  for (const JsonValue& test : list->items) {
    if (test.kind != JsonValue::Kind::object)
      throw LogParserError("TypeError: a test is not a dict");
    const JsonValue* title = test.member("fullTitle");
    if (!title)
      throw LogParserError("KeyError: 'fullTitle'");
    if (title->kind == JsonValue::Kind::array || title->kind == JsonValue::Kind::object)
      throw LogParserError("TypeError: unhashable fullTitle");
    map.set(*title, status);
  }
}

// --- shared parsers -----------------------------------------------------------------------------

// Jest's per-file lines: "PASS path (1.2 s)" / "FAIL path", the timing left out of the name
// (parse_log_carbon, parse_log_react_pdf and lighthouse's jest logs).
StatusMap jest_file_statuses(std::string_view log) {
  static const std::array<std::pair<py::Regex, std::string_view>, 8> patterns{{
      {py::Regex(R"(^PASS\s(.*)\s\([\d\.]+ms\))"), status::passed},
      {py::Regex(R"(^PASS\s(.*)\s\([\d\.]+\ss\))"), status::passed},
      {py::Regex(R"(^PASS\s(.*)\s\([\d\.]+s\))"), status::passed},
      {py::Regex(R"(^PASS\s(.*))"), status::passed},
      {py::Regex(R"(^FAIL\s(.*)\s\([\d\.]+ms\))"), status::failed},
      {py::Regex(R"(^FAIL\s(.*)\s\([\d\.]+\ss\))"), status::failed},
      {py::Regex(R"(^FAIL\s(.*)\s\([\d\.]+s\))"), status::failed},
      {py::Regex(R"(^FAIL\s(.*))"), status::failed},
  }};
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    for (const auto& [pattern, status] : patterns) {
      if (const std::optional<py::Match> m = pattern.match(line)) {
        map.set(m->str(1), status);
        break;
      }
    }
  }
  return map;
}

// Lighthouse's mocha runs: "running N test files" opens a run, "N passing" ends its tests;
// "✔ title (12ms)" and "1) title" under indented suites.
StatusMap lighthouse_mocha(std::string_view log) {
  static const py::Regex run_start(R"(running\s\d+\stest\sfiles)");
  static const py::Regex summary(R"(\d+\spassing)");
  static const std::array<std::pair<py::Regex, std::string_view>, 4> patterns{{
      {py::Regex(R"(✔\s(.*)\s\(\d+m+s\))"), status::passed},
      {py::Regex(R"(✔\s(.*))"), status::passed},
      {py::Regex(R"(\d+\)\s(.*)\s\(\d+m+s\))"), status::failed},
      {py::Regex(R"(\d+\)\s(.*))"), status::failed},
  }};
  StatusMap map;
  const std::vector<std::string> runs = run_start.split(log);
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const std::string_view run = py::strip(before_match(summary, runs[r]));
    Suite suite;
    for (const std::string_view line : py::split(run, "\n")) {
      const std::string_view stripped = py::strip(line);
      bool found = false;
      for (const auto& [pattern, status] : patterns) {
        if (const std::optional<py::Match> m = pattern.match(stripped)) {
          map.set(suite_name(suite, m->str(1), " - "), status);
          found = true;
          break;
        }
      }
      if (!found) {
        if (const std::size_t indent = indent_of(line); indent > 0)
          nest(suite, line, indent);
      }
    }
  }
  return map;
}

// Lighthouse before 3.0: mocha's JSON reporter, read with a regex over its "fullTitle" lines.
StatusMap lighthouse_mocha_json(std::string_view log) {
  static const py::Regex full_title(R"re("fullTitle"\:\s"(.*)",\n)re", py::multiline);
  StatusMap map;
  const std::vector<std::string_view> runs =
      py::split(log, "./node_modules/.bin/mocha --reporter json");
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const std::string_view passes = before_last(after_last(runs[r], R"("passes": [)"), "]");
    for (const py::Match& m : full_title.finditer(passes))
      map.set(m.str(1), status::passed);
    const std::string_view failures = before_last(after_last(runs[r], R"("failures": [)"), "],");
    for (const py::Match& m : full_title.finditer(failures))
      map.set(m.str(1), status::failed);
  }
  return map;
}

// Fusion Next's karma runs (version 1.27 aside): ✓/✗ lines under indented suites, after each
// " xvfb-run " and the browser start, up to TOTAL.
StatusMap next_karma(std::string_view log) {
  static const py::Regex assertion(R"(AssertionError:\s+#([\s\S]*?)\n\n)", py::dotall);
  static const py::Regex fail(R"(.*?✗\s*(.*))");
  static const py::Regex pass(R"(.*?✓\s*(.*))");
  constexpr std::array<std::string_view, 5> skipped_prefixes{"ERROR", "LOG", "WARN", "Check", "in"};
  const std::string text = assertion.sub("", ansi_escape(log));
  StatusMap map;
  Suite suite;
  const std::vector<std::string_view> runs = py::split(text, " xvfb-run ");
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const std::string_view run = after_last(runs[r], "Starting browser Chrome");
    for (const std::string_view line : py::split(run, "\n")) {
      if (line.starts_with("TOTAL"))
        break;
      const std::string_view stripped = py::strip(line);
      bool skip = false;
      for (const std::string_view prefix : skipped_prefixes)
        skip = skip || stripped.starts_with(prefix);
      if (skip)
        continue;
      if (const std::optional<py::Match> m = fail.match(line)) {
        map.set(suite_name(suite, m->str(1), " - "), status::failed);
      } else if (const std::optional<py::Match> p = pass.match(line)) {
        map.set(suite_name(suite, p->str(1), " - "), status::passed);
      } else if (const std::size_t indent = indent_of(line); indent > 0) {
        nest(suite, line, indent);
      }
    }
  }
  return map;
}

// Fusion Next 1.27: cypress-style "Running: spec)" blocks, named by the line after three blank
// lines, with "    N) title" failures and "    ✓ title (12ms)" passes.
StatusMap next_cypress(std::string_view log) {
  static const py::Regex suite_start(R"(Running\:(.*)\)\n{3}\s{2}(.*)\n)");
  static const py::Regex failure(R"(^\s{4}\d+\)\s(.*))", py::multiline);
  static const py::Regex success(R"(^\s{4}✓\s(.*)\()", py::multiline);
  StatusMap map;
  const std::vector<py::Match> suites = suite_start.finditer(log);
  for (std::size_t i = 0; i < suites.size(); ++i) {
    const std::size_t begin = suites[i].end();
    const std::size_t end = i + 1 < suites.size() ? suites[i + 1].start() : log.size();
    const std::string_view block = log.substr(begin, end - begin);
    const std::string_view name = suites[i].str(2);
    for (const py::Match& m : failure.finditer(block))
      map.set(fmt::format("{}: {}", name, py::strip(m.str(1))), status::failed);
    for (const py::Match& m : success.finditer(block))
      map.set(fmt::format("{}: {}", name, py::strip(m.str(1))), status::passed);
  }
  return map;
}

// p5.js: drops JSON-looking lines and blocks (a line ending in "{" or "[" opens one).
std::string remove_json_blocks(std::string_view log) {
  std::string out;
  bool first = true;
  bool in_object = false;
  bool in_list = false;
  for (const std::string_view line : py::split(log, "\n")) {
    const std::string_view trimmed = py::rstrip(line);
    if (trimmed.ends_with('{')) {
      in_object = true;
      continue;
    }
    if (trimmed.ends_with('[')) {
      in_list = true;
      continue;
    }
    if (trimmed == "}" && in_object) {
      in_object = false;
      continue;
    }
    if (trimmed == "]" && in_list) {
      in_list = false;
      continue;
    }
    if (in_object || in_list)
      continue;
    if (trimmed.starts_with('{') && trimmed.ends_with('}'))
      continue;
    if (trimmed.starts_with('[') && trimmed.ends_with(']'))
      continue;
    if (!first)
      out += '\n';
    out += line;
    first = false;
  }
  return out;
}

// str.count(needle), needle not empty.
std::size_t count(std::string_view s, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t at = s.find(needle); at != std::string_view::npos;
       at = s.find(needle, at + needle.size()))
    ++n;
  return n;
}

// p5.js: removes <tag>...</tag> blocks one at a time, from the first match each time, keeping
// one opening tag for each extra one the block held.
std::string remove_xml_blocks(std::string text) {
  static const py::Regex xml(R"(<(\w+)>[\s\S]*?<\/\1>)", py::multiline);
  for (std::optional<py::Match> m = xml.search(text); m; m = xml.search(text)) {
    const std::string opening = fmt::format("<{}>", m->str(1));
    const std::size_t kept = std::max<std::size_t>(count(m->str(0), opening), 1) - 1;
    std::string next(std::string_view(text).substr(0, m->start()));
    for (std::size_t i = 0; i < kept; ++i)
      next += opening;
    next += std::string_view(text).substr(m->end());
    text = std::move(next);
  }
  return text;
}

// p5.js: a failure's title lines must each be indented deeper than the one before (the first
// deeper than nothing).
bool is_valid_fail(std::string_view title) {
  std::size_t last_indent = 0;
  for (const std::string_view line : py::split(title, "\n")) {
    const std::size_t indent = indent_of(line);
    if (indent <= last_indent)
      return false;
    last_indent = indent;
  }
  return true;
}

// Calypso's "  ✓ title (12ms)" line: the title after the suites, or Python's AttributeError
// when the line does not have the shape its pattern wants.
std::string calypso_name(const Suite& suite, const py::Regex& pattern, std::string_view line) {
  const std::optional<py::Match> m = pattern.match(line);
  if (!m)
    throw LogParserError(
        fmt::format("AttributeError: 'NoneType' object has no attribute 'group' ({:.200})", line));
  std::string suites;
  for (std::size_t i = 0; i < suite.size(); ++i) {
    if (i > 0)
      suites += " - ";
    suites += suite[i].name;
  }
  return std::string(py::strip(suites + " - " + std::string(m->str(1))));
}

}  // namespace javascript_detail

StatusMap parse_log_calypso(std::string_view log, const ParseContext&) {
  static const py::Regex timing(R"(\(\d+ms\))");
  static const py::Regex pass_timed(R"(^\s+✓\s(.*)\(\d+ms\)$)");
  static const py::Regex pass_plain(R"(^\s+✓\s(.*))");
  static const py::Regex fail_timed(R"(^\s+✕\s(.*)\(\d+ms\)$)");
  static const py::Regex fail_plain(R"(^\s+✕\s(.*))");
  StatusMap map;
  javascript_detail::Suite suite;
  const std::vector<std::string_view> runs = py::split(log, " ./node_modules/.bin/jest ");
  for (std::size_t r = 1; r < runs.size(); ++r) {
    for (const std::string_view line : py::split(runs[r], "\n")) {
      if (line.starts_with("Test Suites") || line.starts_with("  ● "))
        break;
      const std::string_view stripped = py::strip(line);
      if (stripped.starts_with("✓")) {
        const bool timed = timing.search(line).has_value();
        map.set(javascript_detail::calypso_name(suite, timed ? pass_timed : pass_plain, line),
                status::passed);
      } else if (stripped.starts_with("✕")) {
        const bool timed = timing.search(line).has_value();
        map.set(javascript_detail::calypso_name(suite, timed ? fail_timed : fail_plain, line),
                status::failed);
      } else if (const std::size_t indent = javascript_detail::indent_of(line); indent > 0) {
        javascript_detail::nest(suite, line, indent);
      }
    }
  }
  return map;
}

StatusMap parse_log_bpmn_js(std::string_view log, const ParseContext&) {
  // The third pattern has two groups; its test name is the second.
  static const std::array<std::pair<py::Regex, std::size_t>, 4> patterns{{
      {py::Regex(R"(2KPhantomJS\s[\d\.]+\s\(Linux\s[\d\.]+\)\s(.*)FAILED\n)"), 1},
      {py::Regex(R"(2KPhantomJS\s[\d\.]+\s\(Linux\sx86\_64\)\s(.*)FAILED\n)"), 1},
      {py::Regex(R"(Chrome\sHeadless\s(.*)\s\(Linux\sx86\_64\)\s(.*)FAILED\n)"), 2},
      {py::Regex(R"(HeadlessChrome\s[\d\.]+\s\(Linux\s[\d\.]+\)\s(.*)FAILED\n)"), 1},
  }};
  StatusMap map;
  for (const auto& [pattern, group] : patterns)
    for (const py::Match& m : pattern.finditer(log))
      map.set(m.str(group), status::failed);
  return map;
}

StatusMap parse_log_carbon(std::string_view log, const ParseContext&) {
  return javascript_detail::jest_file_statuses(log);
}

StatusMap parse_log_eslint(std::string_view log, const ParseContext&) {
  static const py::Regex failure(R"((\s{2}\d+\))([\s\S]*?)\s+(?:(.*)Error))");
  static const py::Regex spaces(R"(\s+)");
  StatusMap map;
  for (const py::Match& m : failure.finditer(log))
    map.set(py::strip(spaces.sub(" ", m.str(2))), status::failed);
  return map;
}

StatusMap parse_log_grommet(std::string_view log, const ParseContext&) {
  static const py::Regex timing(R"(\s\([\d\.]+\s?(?:ms|s)\)$)");
  static const py::Regex fail(R"(^FAIL\s(.*))", py::multiline);
  static const py::Regex pass(R"(^PASS\s(.*))", py::multiline);
  StatusMap map;
  for (const py::Match& m : fail.finditer(log))
    map.set(timing.sub("", py::strip(m.str(1))), status::failed);
  for (const py::Match& m : pass.finditer(log))
    map.set(timing.sub("", py::strip(m.str(1))), status::passed);
  return map;
}

StatusMap parse_log_highlightjs(std::string_view log, const ParseContext&) {
  static const py::Regex summary(R"(\n[ \t]*\d+ passing)");
  static const py::Regex timing(R"(\(\d+ms\))");
  static const py::Regex failure_number(R"(^\d+\))");
  // The title after the mark, its "(12ms)" timings dropped.
  auto title = [](std::string_view rest) { return std::string(py::strip(timing.sub("", rest))); };
  auto full_name = [](const std::vector<std::string>& suite, const std::string& test) {
    return suite.empty() ? test : suite.front() + "." + test;
  };
  StatusMap map;
  std::vector<std::string> suite;  // at most one level: the last two-space-indented line
  for (const std::string_view line :
       py::split(javascript_detail::before_match(summary, log), "\n")) {
    const std::string_view stripped = py::strip(line);
    if (stripped.starts_with("✓") || stripped.starts_with("✔")) {
      const std::string_view check = stripped.substr(0, std::string_view("✓").size());
      const std::string test = title(line.substr(line.find(check) + check.size()));
      map.set(full_name(suite, test), status::passed);
    } else if (failure_number.match(stripped)) {
      const std::string test = title(line.substr(line.find(')') + 1));
      map.set(full_name(suite, test), status::failed);
    } else if (line.starts_with("  ")) {
      suite = {std::string(stripped)};
    }
  }
  return map;
}

StatusMap parse_log_lighthouse(std::string_view log, const ParseContext& context) {
  const std::string& version = context.version;
  if (version == "9.5" || version == "10.0" || version == "10.2")
    return javascript_detail::lighthouse_mocha(log);
  const std::optional<double> number = javascript_detail::py_float(version);
  if (!number)
    throw LogParserError(
        fmt::format("ValueError: could not convert string to float: '{}'", version));
  if (*number >= 3)
    return javascript_detail::jest_file_statuses(log);
  return javascript_detail::lighthouse_mocha_json(log);
}

StatusMap parse_log_next(std::string_view log, const ParseContext& context) {
  return context.version == "1.27" ? javascript_detail::next_cypress(log)
                                   : javascript_detail::next_karma(log);
}

StatusMap parse_log_openlayers(std::string_view log, const ParseContext&) {
  static const std::array<py::Regex, 4> patterns{{
      py::Regex(R"(Chrome\sHeadless\s[\d\.]+\s\(Linux\s[\d\.\_\S]+\)\s(.*)\sFAILED\n)",
                py::multiline),
      py::Regex(R"(Chrome\s[\d\.]+\s\(Linux\s[\d\.\_\S]+\)\s(.*)FAILED\n)", py::multiline),
      py::Regex(R"(^\s{2}\d+\)([\s\S]*?)Error:)", py::multiline),
      py::Regex(R"(^case\s(.*):\smismatch)", py::multiline),
  }};
  static const py::Regex spaces(R"(\s+)");
  StatusMap map;
  for (const py::Regex& pattern : patterns)
    for (const py::Match& m : pattern.finditer(log))
      map.set(py::strip(spaces.sub(" ", m.str(1))), status::failed);
  return map;
}

StatusMap parse_log_prismjs(std::string_view log, const ParseContext&) {
  javascript_detail::TitleMap map;
  const std::vector<std::string_view> runs =
      py::split(log, "./node_modules/.bin/mocha tests/run.js --reporter json");
  for (std::size_t r = 1; r < runs.size(); ++r) {
    // The report is taken from the run's first "{" to its last "}".
    const std::string text = "{" +
                             std::string(javascript_detail::before_last(
                                 javascript_detail::after_first(runs[r], "{"), "}")) +
                             "}";
    const javascript_detail::JsonValue results = javascript_detail::JsonReader(text).document();
    javascript_detail::record_titles(map, results, "failures", status::failed);
    javascript_detail::record_titles(map, results, "passes", status::passed);
  }
  return map.statuses();
}

StatusMap parse_log_quarto_cli(std::string_view log, const ParseContext&) {
  static const py::Regex test_case(R"(\[(smoke|unit)\])");
  static const py::Regex excluded(R"(test result:)");
  static const std::array<py::Regex, 2> tmp_files{
      {py::Regex(R"(/tmp/(\w+)\.qmd)"), py::Regex(R"(/tmp/(\w+)/)")}};
  static const std::array<std::pair<py::Regex, std::string_view>, 2> outcomes{{
      {py::Regex("32mok"), status::passed},
      {py::Regex("31mFAILED"), status::failed},
  }};
  // Temporary paths get stable numbers in order of first sight, so names repeat across runs.
  std::vector<std::pair<std::string, std::size_t>> tmp_numbers;
  auto tmp_number = [&](std::string_view path) {
    for (const auto& [seen, n] : tmp_numbers)
      if (seen == path)
        return n;
    tmp_numbers.emplace_back(std::string(path), tmp_numbers.size());
    return tmp_numbers.back().second;
  };
  StatusMap map;
  for (const std::string_view raw : py::split(log, "\n")) {
    if (raw.find("ERRORS") != std::string_view::npos ||
        raw.find("failures:") != std::string_view::npos)
      break;
    if (!test_case.search(raw))
      continue;
    std::string line(raw);
    for (const py::Regex& pattern : tmp_files) {
      if (const std::optional<py::Match> m = pattern.search(line)) {
        const std::size_t n = tmp_number(m->str(0));
        line = pattern.sub(fmt::format("/tmp/{}", n), line);
      }
    }
    const std::string test_name(py::strip(py::split(line, "...").front()));
    const bool rejected =
        excluded.match(line) ||
        (line.find("passed") != std::string::npos && line.find("failed") != std::string::npos &&
         line.find("steps") != std::string::npos) ||
        line.find("34mINFO") != std::string::npos;
    for (const auto& [pattern, status] : outcomes) {
      if (pattern.search(line) && !rejected) {
        map.set(test_name, status);
        break;
      }
    }
    if (!rejected && !map.contains(test_name))
      map.set(test_name, status::failed);
  }
  return map;
}

StatusMap parse_log_chart_js(std::string_view log, const ParseContext&) {
  static const py::Regex failure(R"(Chrome\s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$)",
                                 py::multiline);
  StatusMap map;
  const std::string text = javascript_detail::ansi_escape(log);
  for (const py::Match& m : failure.finditer(text))
    map.set(m.str(1), status::failed);
  return map;
}

StatusMap parse_log_marked(std::string_view log, const ParseContext&) {
  static const py::Regex failure(R"(^\d+\)\s(.*))");
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n"))
    if (const std::optional<py::Match> m = failure.search(line))
      map.set(py::strip(m->str(1)), status::failed);
  return map;
}

StatusMap parse_log_p5js(std::string_view log, const ParseContext&) {
  static const py::Regex failure(R"(^\s*(\d+)\)(.{0,1000}?):)", py::multiline | py::dotall);
  const std::string text = javascript_detail::remove_xml_blocks(
      javascript_detail::remove_json_blocks(javascript_detail::ansi_escape(log)));
  StatusMap map;
  for (const py::Match& m : failure.finditer(text)) {
    if (!javascript_detail::is_valid_fail(m.str(2)))
      continue;
    std::string name;
    bool first = true;
    for (const std::string_view part : py::split(m.str(2), "\n")) {
      if (!first)
        name += ':';
      name += py::strip(part);
      first = false;
    }
    map.set(name, status::failed);
  }
  return map;
}

StatusMap parse_log_react_pdf(std::string_view log, const ParseContext&) {
  return javascript_detail::jest_file_statuses(log);
}

StatusMap parse_log_jest(std::string_view log, const ParseContext&) {
  static const py::Regex result(R"(^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$)");
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    const std::optional<py::Match> m = result.match(py::strip(line));
    if (!m)
      continue;
    const std::string_view symbol = m->str(1);
    const std::string_view status = symbol == "✓"   ? status::passed
                                    : symbol == "✕" ? status::failed
                                                    : status::skipped;
    map.set(py::strip(m->str(2)), status);
  }
  return map;
}

StatusMap parse_log_jest_json(std::string_view log, const ParseContext&) {
  static const py::Regex result(R"(^\[(PASSED|FAILED)\]\s(.+)$)");
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    if (const std::optional<py::Match> m = result.match(py::strip(line)))
      map.set(m->str(2), m->str(1) == "PASSED" ? status::passed : status::failed);
  }
  return map;
}

StatusMap parse_log_vitest(std::string_view log, const ParseContext&) {
  static const py::Regex result(R"(^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$)");
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    const std::optional<py::Match> m = result.match(py::strip(line));
    if (!m)
      continue;
    const std::string_view symbol = m->str(1);
    const std::string_view status = symbol == "✓"   ? status::passed
                                    : symbol == "×" ? status::failed
                                                    : status::skipped;
    map.set(m->str(2), status);
  }
  return map;
}

StatusMap parse_log_karma(std::string_view log, const ParseContext&) {
  static const py::Regex result(R"(^(\s*)?([✔✖])?\s(.*)$)");
  StatusMap map;
  long long current_indent = -1;
  std::vector<std::string> suite;
  bool started = false;
  for (const std::string_view line : py::split(log, "\n")) {
    if (line.starts_with("SUMMARY:"))
      return map;
    if (line.find("Starting browser") != std::string_view::npos) {
      started = true;
      continue;
    }
    if (!started)
      continue;
    const std::optional<py::Match> m = result.match(line);
    if (!m)
      continue;
    const std::string_view indent = m->str(1);
    const std::string_view mark = m->str(2);
    const std::string_view name = m->str(3);
    if (!indent.empty() && mark.empty()) {
      const auto width = static_cast<long long>(py::length(indent));
      if (width > current_indent) {
        current_indent = width;
        suite.emplace_back(name);
      } else if (width < current_indent) {
        current_indent = width;
        if (suite.empty())
          throw LogParserError("IndexError: pop from empty list");
        suite.pop_back();
        continue;
      }
    }
    if (!mark.empty()) {
      std::string full;
      for (const std::string& level : suite)
        full += level + " > ";
      full += name;
      map.set(full, mark == "✔" ? status::passed : status::failed);
    }
  }
  return map;
}

StatusMap parse_log_tap(std::string_view log, const ParseContext&) {
  static const py::Regex result(R"(^(ok|not ok) (\d+) (.+)$)");
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    if (const std::optional<py::Match> m = result.match(py::strip(line)))
      map.set(m->str(3), m->str(1) == "ok" ? status::passed : status::failed);
  }
  return map;
}

StatusMap parse_log_immutable_js(std::string_view log, const ParseContext& context) {
  const std::string_view pr_number = py::split(context.instance_id, "-").back();
  if (pr_number == "2006")
    return parse_log_jest(log, context);
  if (pr_number == "2005")
    return parse_log_jest_json(log, context);
  throw LogParserError(fmt::format("ValueError: Unknown instance id: {}", context.instance_id));
}

}  // namespace rex::swebench::parsers
