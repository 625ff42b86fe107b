// Python's str and re over UTF-8 (py_text.hpp). Patterns are translated from re's syntax into
// Boost.Regex's perl syntax over UTF-32, with every construct whose meaning differs between the
// two (`.`, `^`, `$`, \s \d \w and their negations, \B, escapes, sets) spelled out explicitly, and
// with a traits class whose character classes are Python's own (tables generated from Python).
#include "swebench/py_text.hpp"

// Python takes whatever time a backtracking pattern needs; Boost gives up past these bounds (by
// default 10^8 steps and 4 MB of backtracking state per search). Lift them so that long logs
// match as they do in Python. Only this file instantiates Boost.Regex with its traits.
#ifndef BOOST_REGEX_MAX_STATE_COUNT
#define BOOST_REGEX_MAX_STATE_COUNT 1000000000000000000
#endif
#ifndef BOOST_REGEX_MAX_BLOCKS
#define BOOST_REGEX_MAX_BLOCKS 262144
#endif
#include <boost/regex.hpp>
static_assert(BOOST_REGEX_MAX_STATE_COUNT >= 1000000000000000000,
              "py_text.cpp must include Boost.Regex first in its translation unit");

#include <rex/protocol/python_text.hpp>

#include "swebench/py_unicode_tables.inc"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <stdexcept>

namespace rex::swebench::py {
namespace py_text_detail {

// --- UTF-8 ---------------------------------------------------------------------------------------

struct Decoded {
  char32_t cp;
  std::size_t length;  // bytes
};

/// The code point at s[i] (an invalid byte reads as U+FFFD, one byte long).
inline Decoded decode_at(std::string_view s, std::size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80)
    return {b0, 1};
  const std::size_t left = s.size() - i;
  auto cont = [&](std::size_t k) {
    return k < left && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  auto byte = [&](std::size_t k) { return static_cast<char32_t>(s[i + k] & 0x3F); };
  if (b0 >= 0xC2 && b0 <= 0xDF && cont(1))
    return {(static_cast<char32_t>(b0 & 0x1F) << 6) | byte(1), 2};
  if (b0 >= 0xE0 && b0 <= 0xEF && cont(1) && cont(2)) {
    const char32_t c = (static_cast<char32_t>(b0 & 0x0F) << 12) | (byte(1) << 6) | byte(2);
    if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF))
      return {c, 3};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    const char32_t c =
        (static_cast<char32_t>(b0 & 0x07) << 18) | (byte(1) << 12) | (byte(2) << 6) | byte(3);
    if (c >= 0x10000 && c <= 0x10FFFF)
      return {c, 4};
  }
  return {0xFFFD, 1};
}

/// The start of the code point that ends at s[end) (end > 0).
inline std::size_t previous_start(std::string_view s, std::size_t end) noexcept {
  std::size_t i = end - 1;
  const std::size_t floor = end >= 4 ? end - 4 : 0;
  while (i > floor && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
    --i;
  // Accept it only when it decodes to exactly [i, end); else the last byte stands alone.
  return decode_at(s, i).length == end - i ? i : end - 1;
}

/// Text as UTF-32 with the byte offset of each code point (and of the end).
struct Utf32 {
  std::u32string text;
  std::vector<std::size_t> offsets;
};

inline Utf32 to_utf32(std::string_view s) {
  Utf32 out;
  out.text.reserve(s.size());
  out.offsets.reserve(s.size() + 1);
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = decode_at(s, i);
    out.text.push_back(d.cp);
    out.offsets.push_back(i);
    i += d.length;
  }
  out.offsets.push_back(s.size());
  return out;
}

inline std::u32string utf32_of(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = decode_at(s, i);
    out.push_back(d.cp);
    i += d.length;
  }
  return out;
}

// --- character classes ---------------------------------------------------------------------------

inline bool in_table(std::span<const tables::CodeRange> table, char32_t c) noexcept {
  auto it = std::upper_bound(table.begin(), table.end(), c,
                             [](char32_t v, const tables::CodeRange& r) { return v < r.lo; });
  return it != table.begin() && c <= std::prev(it)->hi;
}

inline bool ascii_alpha(char32_t c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool ascii_digit(char32_t c) noexcept {
  return c >= '0' && c <= '9';
}

inline bool space(char32_t c) noexcept {
  if (c < 0x80)
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return in_table(tables::space, c);
}
inline bool decimal(char32_t c) noexcept {
  return c < 0x80 ? ascii_digit(c) : in_table(tables::decimal, c);
}
inline bool digit(char32_t c) noexcept {
  return c < 0x80 ? ascii_digit(c) : in_table(tables::digit, c);
}
inline bool alpha(char32_t c) noexcept {
  return c < 0x80 ? ascii_alpha(c) : in_table(tables::alpha, c);
}
inline bool alnum(char32_t c) noexcept {
  return c < 0x80 ? ascii_alpha(c) || ascii_digit(c) : in_table(tables::alnum, c);
}
inline bool word(char32_t c) noexcept {
  return c == '_' || alnum(c);
}

/// The digit value of a decimal character, or -1.
inline int decimal_value(char32_t c) noexcept {
  if (ascii_digit(c))
    return static_cast<int>(c - '0');
  const std::span<const tables::DecimalRun> runs = tables::decimal_values;
  auto it = std::upper_bound(runs.begin(), runs.end(), c,
                             [](char32_t v, const tables::DecimalRun& r) { return v < r.lo; });
  if (it == runs.begin() || c > std::prev(it)->hi)
    return -1;
  --it;
  return it->value + static_cast<int>(c - it->lo);
}

/// re.IGNORECASE's equivalence: the representative of c's case class.
inline char32_t case_fold(char32_t c) noexcept {
  if (c < 0x80)
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
  const std::span<const tables::CaseFold> folds = tables::case_folds;
  auto it = std::lower_bound(folds.begin(), folds.end(), c,
                             [](const tables::CaseFold& f, char32_t v) { return f.from < v; });
  return it != folds.end() && it->from == c ? it->to : c;
}

/// A code point set (strip(chars)).
inline bool contains_cp(std::string_view chars, char32_t c) noexcept {
  for (std::size_t i = 0; i < chars.size();) {
    const Decoded d = decode_at(chars, i);
    if (d.cp == c)
      return true;
    i += d.length;
  }
  return false;
}

template <class Pred>
std::string_view lstrip_if(std::string_view s, Pred pred) {
  std::size_t i = 0;
  while (i < s.size()) {
    const Decoded d = decode_at(s, i);
    if (!pred(d.cp))
      break;
    i += d.length;
  }
  return s.substr(i);
}

template <class Pred>
std::string_view rstrip_if(std::string_view s, Pred pred) {
  std::size_t end = s.size();
  while (end > 0) {
    const std::size_t start = previous_start(s, end);
    if (!pred(decode_at(s, start).cp))
      break;
    end = start;
  }
  return s.substr(0, end);
}

template <class Pred>
bool all_of_cps(std::string_view s, Pred pred) {
  if (s.empty())
    return false;
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = decode_at(s, i);
    if (!pred(d.cp))
      return false;
    i += d.length;
  }
  return true;
}

// --- Boost.Regex traits: Python's classes over UTF-32 ------------------------------------------

enum ClassBits : std::uint32_t {
  class_space = 1u << 0,
  class_not_space = 1u << 1,
  class_digit = 1u << 2,
  class_not_digit = 1u << 3,
  class_word = 1u << 4,
  class_not_word = 1u << 5,
  class_alpha = 1u << 6,  // Boost asks for "alpha", "lower" and "upper"; patterns never use them
  class_lower = 1u << 7,
  class_upper = 1u << 8,
};

class PyRegexTraits {
 public:
  using char_type = char32_t;
  using size_type = std::size_t;
  using string_type = std::u32string;
  using locale_type = int;
  using char_class_type = std::uint32_t;
  struct boost_extensions_tag {};

  static size_type length(const char_type* p) { return std::char_traits<char32_t>::length(p); }

  boost::regex_constants::syntax_type syntax_type(char_type c) const {
    return c > 0 && c < 0x7F
               ? boost::BOOST_REGEX_DETAIL_NS::get_default_syntax_type(static_cast<char>(c))
               : boost::regex_constants::syntax_char;
  }
  boost::regex_constants::escape_syntax_type escape_syntax_type(char_type c) const {
    return c > 0 && c < 0x7F
               ? boost::BOOST_REGEX_DETAIL_NS::get_default_escape_syntax_type(static_cast<char>(c))
               : boost::regex_constants::escape_type_identity;
  }
  char_type translate(char_type c) const { return c; }
  char_type translate_nocase(char_type c) const { return case_fold(c); }
  char_type translate(char_type c, bool icase) const { return icase ? case_fold(c) : c; }
  char_type tolower(char_type c) const { return case_fold(c); }
  char_type toupper(char_type c) const { return c; }
  string_type transform(const char_type* p1, const char_type* p2) const {
    return string_type(p1, p2);
  }
  string_type transform_primary(const char_type* p1, const char_type* p2) const {
    return string_type(p1, p2);
  }
  char_class_type lookup_classname(const char_type* p1, const char_type* p2) const {
    const std::u32string name(p1, p2);
    if (name == U"s" || name == U"pys")
      return class_space;
    if (name == U"pyS")
      return class_not_space;
    if (name == U"d" || name == U"pyd")
      return class_digit;
    if (name == U"pyD")
      return class_not_digit;
    if (name == U"w" || name == U"pyw")
      return class_word;
    if (name == U"pyW")
      return class_not_word;
    if (name == U"alpha")
      return class_alpha;
    if (name == U"lower")
      return class_lower;
    if (name == U"upper")
      return class_upper;
    return 0;
  }
  string_type lookup_collatename(const char_type* p1, const char_type* p2) const {
    return p2 - p1 == 1 ? string_type(p1, p2) : string_type();
  }
  bool isctype(char_type c, char_class_type m) const {
    if ((m & (class_space | class_not_space)) != 0) {
      const bool s = space(c);
      if (((m & class_space) && s) || ((m & class_not_space) && !s))
        return true;
    }
    if ((m & (class_digit | class_not_digit)) != 0) {
      const bool d = decimal(c);
      if (((m & class_digit) && d) || ((m & class_not_digit) && !d))
        return true;
    }
    if ((m & (class_word | class_not_word)) != 0) {
      const bool w = word(c);
      if (((m & class_word) && w) || ((m & class_not_word) && !w))
        return true;
    }
    return (m & (class_alpha | class_lower | class_upper)) != 0 && alpha(c);
  }
  std::intmax_t toi(const char_type*& p1, const char_type* p2, int radix) const {
    return boost::BOOST_REGEX_DETAIL_NS::global_toi(p1, p2, radix, *this);
  }
  int value(char_type c, int radix) const {
    int v = -1;
    if (c >= '0' && c <= '9')
      v = static_cast<int>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = static_cast<int>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v = static_cast<int>(c - 'A' + 10);
    return v < radix ? v : -1;
  }
  locale_type imbue(locale_type l) { return l; }
  locale_type getloc() const { return 0; }
  std::string error_string(boost::regex_constants::error_type e) const {
    return boost::BOOST_REGEX_DETAIL_NS::get_default_error_string(e);
  }
};

using BoostRegex = boost::basic_regex<char32_t, PyRegexTraits>;
using BoostMatch = boost::match_results<const char32_t*>;

// --- re's syntax -> Boost's ---------------------------------------------------------------------

constexpr unsigned long long kMaxRepeat = 4294967295ull;  // re's MAXREPEAT

struct Translation {
  std::u32string pattern;
  std::size_t groups = 0;
  std::map<std::string, std::size_t, std::less<>> names;
  unsigned flags = 0;  // with the global inline flags
};

/// re.error: the pattern is one Python refuses.
[[noreturn]] inline void bad_pattern(const std::string& what) {
  throw std::invalid_argument("re.error: " + what);
}

struct Restart {};  // global flags changed how the pattern reads: parse it again

class Translator {
 public:
  Translator(std::u32string pattern, unsigned flags) : p_(std::move(pattern)), flags_(flags) {}

  Translation run() {
    for (;;) {
      try {
        return attempt();
      } catch (const Restart&) {
      }
    }
  }

 private:
  // Scoped flags as re applies them while parsing.
  struct Scope {
    bool icase, multiline, dotall, verbose;
  };

  // One parsed item of a sequence: its Boost text and what kind of item it is.
  enum class Kind { atom, anchor, repeat, assertion };
  struct Item {
    std::u32string text;
    Kind kind;
  };

  Translation attempt() {
    i_ = 0;
    groups_ = 0;
    closed_.clear();
    names_.clear();
    condrefs_.clear();
    lookbehind_groups_.reset();
    const Scope scope{(flags_ & ignorecase) != 0, (flags_ & multiline) != 0, (flags_ & dotall) != 0,
                      (flags_ & verbose) != 0};
    std::u32string body = parse_sub(scope, true);
    if (i_ < p_.size()) {
      if (p_[i_] == U')')
        bad_pattern("unbalanced parenthesis");
      bad_pattern("internal error in regular expression parser");
    }
    for (std::size_t g : condrefs_)
      if (g > groups_)
        bad_pattern("invalid group reference " + std::to_string(g));
    Translation out;
    out.pattern = std::move(body);
    out.groups = groups_;
    out.names = std::move(names_);
    out.flags = flags_;
    return out;
  }

  bool at_end() const { return i_ >= p_.size(); }
  char32_t peek() const { return at_end() ? 0 : p_[i_]; }
  bool next_is(char32_t c) const { return !at_end() && p_[i_] == c; }
  bool accept(char32_t c) {
    if (next_is(c)) {
      ++i_;
      return true;
    }
    return false;
  }

  static void hex_into(std::u32string& out, char32_t c) {
    static constexpr char digits[] = "0123456789ABCDEF";
    out += U"\\x{";
    char buf[8];
    int n = 0;
    do {
      buf[n++] = digits[c & 0xF];
      c >>= 4;
    } while (c != 0);
    while (n > 0)
      out += static_cast<char32_t>(buf[--n]);
    out += U'}';
  }
  static std::u32string literal(char32_t c) {
    if (c < 0x80 && (ascii_alpha(c) || ascii_digit(c)))
      return std::u32string(1, c);
    std::u32string out;
    hex_into(out, c);
    return out;
  }
  static std::u32string set_member(char32_t c) {
    std::u32string out;
    hex_into(out, c);
    return out;
  }
  static std::string utf8(const std::u32string& s) {
    std::string out;
    for (char32_t c : s)
      append_utf8(out, c);
    return out;
  }

  // re's categories (\d \D \s \S \w \W) as Boost set members.
  static const char32_t* category_member(char32_t c) {
    switch (c) {
      case U'd':
        return U"[:pyd:]";
      case U'D':
        return U"[:pyD:]";
      case U's':
        return U"[:pys:]";
      case U'S':
        return U"[:pyS:]";
      case U'w':
        return U"[:pyw:]";
      case U'W':
        return U"[:pyW:]";
      default:
        return nullptr;
    }
  }

  static bool is_oct(char32_t c) { return c >= '0' && c <= '7'; }
  static bool is_hex(char32_t c) {
    return ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  // Reads exactly n hex digits after \x, \u or \U.
  char32_t hex_escape(std::size_t n, char32_t kind) {
    std::uint64_t v = 0;
    std::size_t got = 0;
    while (got < n && !at_end() && is_hex(p_[i_])) {
      v = v * 16 + static_cast<std::uint64_t>(boost::BOOST_REGEX_DETAIL_NS::global_value(p_[i_]));
      ++i_;
      ++got;
    }
    if (got != n)
      bad_pattern(std::string("incomplete escape \\") + static_cast<char>(kind));
    if (v > 0x10FFFF)
      bad_pattern(std::string("bad escape \\") + static_cast<char>(kind));
    return static_cast<char32_t>(v);
  }

  std::string group_name_until(char32_t terminator) {
    std::u32string name;
    for (;;) {
      if (at_end()) {
        if (name.empty())
          bad_pattern("missing group name");
        bad_pattern("missing " + std::string(1, static_cast<char>(terminator)) +
                    ", unterminated name");
      }
      const char32_t c = p_[i_++];
      if (c == terminator)
        break;
      name += c;
    }
    if (name.empty())
      bad_pattern("missing group name");
    return utf8(name);
  }

  static bool is_identifier(std::string_view name) {
    if (name.empty())
      return false;
    bool first = true;
    for (std::size_t i = 0; i < name.size();) {
      const Decoded d = decode_at(name, i);
      if (!(d.cp == '_' || alpha(d.cp) || (!first && alnum(d.cp))))
        return false;
      first = false;
      i += d.length;
    }
    return true;
  }

  void check_group_name(const std::string& name) {
    if (!is_identifier(name))
      bad_pattern("bad character in group name '" + name + "'");
  }

  std::u32string group_ref(std::size_t g) {
    if (g >= closed_.size() + 1 || !closed_[g - 1])
      bad_pattern("cannot refer to an open group");
    if (lookbehind_groups_ && g >= *lookbehind_groups_)
      bad_pattern("cannot refer to group defined in the same lookbehind subpattern");
    std::u32string out = U"\\g{";
    for (char c : std::to_string(g))
      out += static_cast<char32_t>(c);
    out += U'}';
    return out;
  }

  // An escape outside a set (the backslash consumed).
  Item escape(const Scope&) {
    if (at_end())
      bad_pattern("bad escape (end of pattern)");
    const char32_t c = p_[i_++];
    switch (c) {
      case U'A':
        return {U"\\A", Kind::anchor};
      case U'Z':
        return {U"\\z", Kind::anchor};
      case U'b':
        return {U"\\b", Kind::anchor};
      case U'B':
        // Python's \B never matches in an empty string.
        return {U"(?:(?<=.)|(?=.))\\B", Kind::anchor};
      case U'd':
      case U'D':
      case U's':
      case U'S':
      case U'w':
      case U'W':
        return {U"[" + std::u32string(category_member(c)) + U"]", Kind::atom};
      case U'a':
        return {literal(7), Kind::atom};
      case U'f':
        return {literal(12), Kind::atom};
      case U'n':
        return {literal(10), Kind::atom};
      case U'r':
        return {literal(13), Kind::atom};
      case U't':
        return {literal(9), Kind::atom};
      case U'v':
        return {literal(11), Kind::atom};
      case U'\\':
        return {literal(U'\\'), Kind::atom};
      case U'x':
        return {literal(hex_escape(2, c)), Kind::atom};
      case U'u':
        return {literal(hex_escape(4, c)), Kind::atom};
      case U'U':
        return {literal(hex_escape(8, c)), Kind::atom};
      case U'N':
        bad_pattern("\\N{...} escapes are not supported");
      case U'0': {
        char32_t v = 0;
        for (int k = 0; k < 2 && !at_end() && is_oct(p_[i_]); ++k)
          v = v * 8 + (p_[i_++] - U'0');
        return {literal(v), Kind::atom};
      }
      default:
        break;
    }
    if (ascii_digit(c)) {
      std::size_t g = c - U'0';
      if (!at_end() && ascii_digit(p_[i_])) {
        const char32_t c2 = p_[i_++];
        if (is_oct(c) && is_oct(c2) && !at_end() && is_oct(p_[i_])) {
          const char32_t v = (c - U'0') * 64 + (c2 - U'0') * 8 + (p_[i_++] - U'0');
          if (v > 0377)
            bad_pattern("octal escape value outside of range 0-0o377");
          return {literal(v), Kind::atom};
        }
        g = g * 10 + (c2 - U'0');
      }
      if (g < groups_ + 1)
        return {group_ref(g), Kind::atom};
      bad_pattern("invalid group reference " + std::to_string(g));
    }
    if (c < 0x80 && ascii_alpha(c))
      bad_pattern(std::string("bad escape \\") + static_cast<char>(c));
    return {literal(c), Kind::atom};
  }

  // An escape inside a set: a literal code point, or a category (returned in member).
  char32_t set_escape(const char32_t*& member) {
    member = nullptr;
    if (at_end())
      bad_pattern("bad escape (end of pattern)");
    const char32_t c = p_[i_++];
    switch (c) {
      case U'a':
        return 7;
      case U'b':
        return 8;
      case U'f':
        return 12;
      case U'n':
        return 10;
      case U'r':
        return 13;
      case U't':
        return 9;
      case U'v':
        return 11;
      case U'\\':
        return U'\\';
      case U'd':
      case U'D':
      case U's':
      case U'S':
      case U'w':
      case U'W':
        member = category_member(c);
        return 0;
      case U'x':
        return hex_escape(2, c);
      case U'u':
        return hex_escape(4, c);
      case U'U':
        return hex_escape(8, c);
      case U'N':
        bad_pattern("\\N{...} escapes are not supported");
      default:
        break;
    }
    if (is_oct(c)) {
      char32_t v = c - U'0';
      for (int k = 0; k < 2 && !at_end() && is_oct(p_[i_]); ++k)
        v = v * 8 + (p_[i_++] - U'0');
      if (v > 0377)
        bad_pattern("octal escape value outside of range 0-0o377");
      return v;
    }
    if (c < 0x80 && (ascii_alpha(c) || ascii_digit(c)))
      bad_pattern(std::string("bad escape \\") + static_cast<char>(c));
    return c;
  }

  // A set, the '[' consumed.
  Item set() {
    const bool negate = accept(U'^');
    std::u32string members;
    bool any = false;
    for (;;) {
      if (at_end())
        bad_pattern("unterminated character set");
      char32_t c = p_[i_++];
      if (c == U']' && any)
        break;
      const char32_t* category = nullptr;
      if (c == U'\\')
        c = set_escape(category);
      if (accept(U'-')) {
        if (at_end())
          bad_pattern("unterminated character set");
        char32_t hi = p_[i_++];
        if (hi == U']') {
          members += category ? std::u32string(category) : set_member(c);
          members += set_member(U'-');
          any = true;
          break;
        }
        const char32_t* category2 = nullptr;
        if (hi == U'\\')
          hi = set_escape(category2);
        if (category || category2 || hi < c)
          bad_pattern("bad character range");
        members += set_member(c) + U"-" + set_member(hi);
      } else {
        members += category ? std::u32string(category) : set_member(c);
      }
      any = true;
    }
    return {(negate ? U"[^" : U"[") + members + U"]", Kind::atom};
  }

  // After an item: a quantifier, if any; false when the text there is not one.
  bool quantifier(std::vector<Item>& items) {
    const char32_t c = peek();
    if (c != U'*' && c != U'+' && c != U'?' && c != U'{')
      return false;
    const std::size_t here = i_;
    ++i_;
    std::u32string q;
    if (c == U'{') {
      if (next_is(U'}')) {
        i_ = here;
        return false;
      }
      std::u32string lo, hi;
      while (!at_end() && ascii_digit(p_[i_]))
        lo += p_[i_++];
      bool comma = false;
      if (accept(U',')) {
        comma = true;
        while (!at_end() && ascii_digit(p_[i_]))
          hi += p_[i_++];
      } else {
        hi = lo;
      }
      if (!accept(U'}')) {
        i_ = here;
        return false;
      }
      auto number = [](const std::u32string& digits) {
        unsigned long long v = 0;
        for (char32_t d : digits) {
          v = v * 10 + (d - U'0');
          if (v >= kMaxRepeat)
            bad_pattern("the repetition number is too large");
        }
        return v;
      };
      const unsigned long long min = lo.empty() ? 0 : number(lo);
      const bool bounded = !hi.empty();
      const unsigned long long max = bounded ? number(hi) : kMaxRepeat;
      if (bounded && max < min)
        bad_pattern("min repeat greater than max repeat");
      auto ascii = [](unsigned long long v) {
        std::u32string s;
        for (char d : std::to_string(v))
          s += static_cast<char32_t>(d);
        return s;
      };
      q = U"{" + ascii(min);
      if (comma || !bounded || min != max)
        q += U"," + (bounded ? ascii(max) : std::u32string());
      q += U"}";
    } else {
      q = std::u32string(1, c);
    }
    if (items.empty() || items.back().kind == Kind::anchor)
      bad_pattern("nothing to repeat");
    if (items.back().kind == Kind::repeat)
      bad_pattern("multiple repeat");
    if (accept(U'?'))
      q += U'?';
    else if (accept(U'+'))
      q += U'+';
    Item& item = items.back();
    if (item.kind == Kind::assertion)
      item.text = U"(?:" + item.text + U")";
    item.text += q;
    item.kind = Kind::repeat;
    return true;
  }

  // Inline flags after "(?" whose first letter (or '-') is c: global when they end with ')'.
  // Returns true for a scoped group (its scope in inner), false for global flags (applied).
  bool flags_group(char32_t c, const Scope& outer, Scope& inner, std::u32string& open) {
    unsigned add = 0, del = 0;
    auto flag_of = [](char32_t f) -> unsigned {
      switch (f) {
        case U'i':
          return ignorecase;
        case U'm':
          return multiline;
        case U's':
          return dotall;
        case U'x':
          return verbose;
        case U'u':
          return 1u << 8;
        case U'a':
          return 1u << 9;
        case U'L':
          return 1u << 10;
        default:
          return 0;
      }
    };
    if (c != U'-') {
      for (;;) {
        const unsigned f = flag_of(c);
        if (f == (1u << 10))
          bad_pattern("bad inline flags: cannot use 'L' flag with a str pattern");
        if (f == (1u << 9))
          bad_pattern("the ASCII flag is not supported");
        add |= f;
        if (at_end())
          bad_pattern("missing -, : or )");
        c = p_[i_++];
        if (c == U')' || c == U'-' || c == U':')
          break;
        if (!flag_of(c))
          bad_pattern(alpha(c) ? "unknown flag" : "missing -, : or )");
      }
    }
    if (c == U')') {
      // Global flags.
      if (!at_global_start_)
        bad_pattern("global flags not at the start of the expression");
      const unsigned before = flags_;
      flags_ |= add & (ignorecase | multiline | dotall | verbose);
      if (flags_ != before)
        throw Restart{};
      return false;
    }
    if (c == U'-') {
      if (at_end())
        bad_pattern("missing flag");
      c = p_[i_++];
      if (!flag_of(c))
        bad_pattern(alpha(c) ? "unknown flag" : "missing flag");
      for (;;) {
        const unsigned f = flag_of(c);
        if (f & ((1u << 8) | (1u << 9) | (1u << 10)))
          bad_pattern("bad inline flags: cannot turn off flags 'a', 'u' and 'L'");
        del |= f;
        if (at_end())
          bad_pattern("missing :");
        c = p_[i_++];
        if (c == U':')
          break;
        if (!flag_of(c))
          bad_pattern(alpha(c) ? "unknown flag" : "missing :");
      }
    }
    if (add & del)
      bad_pattern("bad inline flags: flag turned on and off");
    inner = outer;
    auto apply = [&](unsigned f, bool& field) {
      if (add & f)
        field = true;
      if (del & f)
        field = false;
    };
    apply(ignorecase, inner.icase);
    apply(multiline, inner.multiline);
    apply(dotall, inner.dotall);
    apply(verbose, inner.verbose);
    if (inner.icase != outer.icase)
      open = inner.icase ? U"(?i:" : U"(?-i:";
    else
      open = U"(?:";
    return true;
  }

  // Boost refuses some empty groups ("(?>)", "(?=)") that match the empty string in Python.
  static std::u32string non_empty(std::u32string body) { return body.empty() ? U"(?:)" : body; }

  // A group, the '(' consumed. nullopt for what adds nothing (comments, global flags).
  std::optional<Item> group(const Scope& scope, bool first_in_pattern) {
    Scope inner = scope;
    std::u32string open = U"(";
    std::optional<std::string> name;
    bool capture = true;
    if (accept(U'?')) {
      if (at_end())
        bad_pattern("unexpected end of pattern");
      const char32_t c = p_[i_++];
      if (c == U'P') {
        if (accept(U'<')) {
          name = group_name_until(U'>');
          check_group_name(*name);
        } else if (accept(U'=')) {
          const std::string ref = group_name_until(U')');
          check_group_name(ref);
          auto it = names_.find(ref);
          if (it == names_.end())
            bad_pattern("unknown group name '" + ref + "'");
          return Item{group_ref(it->second), Kind::atom};
        } else {
          if (at_end())
            bad_pattern("unexpected end of pattern");
          bad_pattern("unknown extension ?P" + utf8(std::u32string(1, p_[i_])));
        }
      } else if (c == U':') {
        capture = false;
        open = U"(?:";
      } else if (c == U'#') {
        for (;;) {
          if (at_end())
            bad_pattern("missing ), unterminated comment");
          if (p_[i_++] == U')')
            break;
        }
        return std::nullopt;
      } else if (c == U'=' || c == U'!' || c == U'<') {
        char32_t d = c;
        bool behind = false;
        if (c == U'<') {
          if (at_end())
            bad_pattern("unexpected end of pattern");
          d = p_[i_++];
          if (d != U'=' && d != U'!')
            bad_pattern("unknown extension ?<" + utf8(std::u32string(1, d)));
          behind = true;
        }
        const bool outermost = behind && !lookbehind_groups_;
        if (outermost)
          lookbehind_groups_ = groups_ + 1;
        std::u32string body = parse_sub(scope, false);
        if (outermost)
          lookbehind_groups_.reset();
        if (!accept(U')'))
          bad_pattern("missing ), unterminated subpattern");
        std::u32string text = U"(?";
        if (behind)
          text += U'<';
        text += d;
        return Item{text + non_empty(body) + U")", Kind::assertion};
      } else if (c == U'(') {
        return conditional(scope);
      } else if (c == U'>') {
        capture = false;
        open = U"(?>";
      } else if (c == U'-' || c == U'i' || c == U'm' || c == U's' || c == U'x' || c == U'a' ||
                 c == U'u' || c == U'L') {
        at_global_start_ = first_in_pattern;
        const bool scoped = flags_group(c, scope, inner, open);
        if (!scoped)
          return std::nullopt;
        capture = false;
      } else {
        bad_pattern("unknown extension ?" + utf8(std::u32string(1, c)));
      }
    }
    std::size_t index = 0;
    if (capture) {
      index = ++groups_;
      closed_.push_back(false);
      if (name) {
        if (names_.count(*name))
          bad_pattern("redefinition of group name '" + *name + "'");
        names_.emplace(*name, index);
      }
    }
    std::u32string body = parse_sub(inner, false);
    if (!accept(U')'))
      bad_pattern("missing ), unterminated subpattern");
    if (capture)
      closed_[index - 1] = true;
    return Item{open + non_empty(body) + U")", Kind::atom};
  }

  // (?(id/name)yes|no), the "(?(" consumed.
  Item conditional(const Scope& scope) {
    const std::string cond = group_name_until(U')');
    std::size_t g = 0;
    if (is_identifier(cond)) {
      auto it = names_.find(cond);
      if (it == names_.end())
        bad_pattern("unknown group name '" + cond + "'");
      g = it->second;
    } else {
      if (!std::all_of(cond.begin(), cond.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        bad_pattern("bad character in group name '" + cond + "'");
      if (cond.size() > 9)
        bad_pattern("invalid group reference " + cond);
      g = std::stoul(cond);
      if (g == 0)
        bad_pattern("bad group number");
      condrefs_.push_back(g);
    }
    if (lookbehind_groups_ && g >= *lookbehind_groups_)
      bad_pattern("cannot refer to group defined in the same lookbehind subpattern");
    std::u32string yes = parse_seq(scope, false);
    std::u32string no;
    bool has_no = false;
    if (accept(U'|')) {
      has_no = true;
      no = parse_seq(scope, false);
      if (next_is(U'|'))
        bad_pattern("conditional backref with more than two branches");
    }
    if (!accept(U')'))
      bad_pattern("missing ), unterminated subpattern");
    std::u32string text = U"(?(";
    for (char ch : std::to_string(g))
      text += static_cast<char32_t>(ch);
    text += U')';
    // Boost's conditional takes a branch only as a group: wrap both.
    text += U"(?:" + yes + U")";
    if (has_no)
      text += U"|(?:" + no + U")";
    return {text + U")", Kind::atom};
  }

  // A sequence up to '|' or ')' or the end.
  std::u32string parse_seq(const Scope& scope, bool top_first) {
    std::vector<Item> items;
    while (!at_end()) {
      const char32_t c = p_[i_];
      if (c == U'|' || c == U')')
        break;
      ++i_;
      if (scope.verbose) {
        if (c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || c == U'\v' || c == U'\f')
          continue;
        if (c == U'#') {
          while (!at_end() && p_[i_++] != U'\n') {
          }
          continue;
        }
      }
      switch (c) {
        case U'\\':
          items.push_back(escape(scope));
          break;
        case U'[':
          items.push_back(set());
          break;
        case U'*':
        case U'+':
        case U'?':
        case U'{':
          --i_;
          if (!quantifier(items)) {
            ++i_;
            items.push_back({literal(c), Kind::atom});
          }
          break;
        case U'.':
          items.push_back({scope.dotall ? U"." : U"[^\\x{A}]", Kind::atom});
          break;
        case U'^':
          items.push_back({scope.multiline ? U"(?:\\A|(?<=\\x{A}))" : U"\\A", Kind::anchor});
          break;
        case U'$':
          items.push_back({scope.multiline ? U"(?=\\x{A}|\\z)" : U"(?=\\x{A}?\\z)", Kind::anchor});
          break;
        case U'(':
          if (std::optional<Item> item = group(scope, top_first && items.empty()))
            items.push_back(std::move(*item));
          break;
        default:
          items.push_back({literal(c), Kind::atom});
          break;
      }
    }
    std::u32string out;
    for (const Item& item : items)
      out += item.text;
    return out;
  }

  std::u32string parse_sub(const Scope& scope, bool top) {
    std::u32string out = parse_seq(scope, top);
    while (accept(U'|')) {
      out += U'|';
      out += parse_seq(scope, false);
    }
    return out;
  }

  std::u32string p_;
  unsigned flags_;
  std::size_t i_ = 0;
  std::size_t groups_ = 0;
  std::vector<bool> closed_;
  std::map<std::string, std::size_t, std::less<>> names_;
  std::vector<std::size_t> condrefs_;
  std::optional<std::size_t> lookbehind_groups_;
  bool at_global_start_ = false;
};

// --- replacement templates ---------------------------------------------------------------------

struct TemplatePart {
  std::string literal;  // used when group is nullopt
  std::optional<std::size_t> group;
};

}  // namespace py_text_detail

// --- UTF-8
// ----------------------------------------------------------------------------------------

CodePoint decode_utf8(std::string_view s, std::size_t i) noexcept {
  using namespace py_text_detail;
  const Decoded d = decode_at(s, i);
  return {d.cp, d.length};
}

void append_utf8(std::string& out, char32_t c) {
  rex::append_utf8(out, c);
}

// --- str ----------------------------------------------------------------------------------------

bool is_space(char32_t c) noexcept {
  using namespace py_text_detail;
  return space(c);
}

std::vector<std::string_view> split(std::string_view s, std::string_view sep, int maxsplit) {
  if (sep.empty())
    throw std::invalid_argument("empty separator");
  std::vector<std::string_view> out;
  std::size_t start = 0;
  int n = 0;
  while (maxsplit < 0 || n < maxsplit) {
    const std::size_t at = s.find(sep, start);
    if (at == std::string_view::npos)
      break;
    out.push_back(s.substr(start, at - start));
    start = at + sep.size();
    ++n;
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string_view> split(std::string_view s) {
  return split_ws(s, -1);
}

std::vector<std::string_view> split_ws(std::string_view s, int maxsplit) {
  using namespace py_text_detail;
  std::vector<std::string_view> out;
  std::size_t i = 0;
  int n = 0;
  while (i < s.size()) {
    // Skip whitespace.
    while (i < s.size()) {
      const Decoded d = decode_at(s, i);
      if (!space(d.cp))
        break;
      i += d.length;
    }
    if (i >= s.size())
      break;
    if (maxsplit >= 0 && n >= maxsplit) {
      out.push_back(s.substr(i));
      break;
    }
    const std::size_t start = i;
    while (i < s.size()) {
      const Decoded d = decode_at(s, i);
      if (space(d.cp))
        break;
      i += d.length;
    }
    out.push_back(s.substr(start, i - start));
    ++n;
  }
  return out;
}

std::vector<std::string_view> rsplit(std::string_view s, std::string_view sep, int maxsplit) {
  if (sep.empty())
    throw std::invalid_argument("empty separator");
  std::vector<std::string_view> out;
  std::size_t end = s.size();
  int n = 0;
  while (maxsplit < 0 || n < maxsplit) {
    if (end < sep.size())
      break;
    const std::size_t at = s.substr(0, end).rfind(sep);
    if (at == std::string_view::npos)
      break;
    out.push_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
    ++n;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string_view> splitlines(std::string_view s, bool keepends) {
  using namespace py_text_detail;
  std::vector<std::string_view> out;
  std::size_t start = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    const Decoded d = decode_at(s, i);
    std::size_t brk = 0;  // length of the line break here
    switch (d.cp) {
      case U'\r':
        brk = i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
        break;
      case U'\n':
      case 0x0B:
      case 0x0C:
      case 0x1C:
      case 0x1D:
      case 0x1E:
      case 0x85:
      case 0x2028:
      case 0x2029:
        brk = d.length;
        break;
      default:
        break;
    }
    if (brk == 0) {
      i += d.length;
      continue;
    }
    out.push_back(s.substr(start, (keepends ? i + brk : i) - start));
    i += brk;
    start = i;
  }
  if (start < s.size())
    out.push_back(s.substr(start));
  return out;
}

std::string_view strip(std::string_view s) {
  return rstrip(lstrip(s));
}
std::string_view lstrip(std::string_view s) {
  using namespace py_text_detail;
  return lstrip_if(s, [](char32_t c) { return space(c); });
}
std::string_view rstrip(std::string_view s) {
  using namespace py_text_detail;
  return rstrip_if(s, [](char32_t c) { return space(c); });
}
std::string_view strip(std::string_view s, std::string_view chars) {
  return rstrip(lstrip(s, chars), chars);
}
std::string_view lstrip(std::string_view s, std::string_view chars) {
  using namespace py_text_detail;
  return lstrip_if(s, [chars](char32_t c) { return contains_cp(chars, c); });
}
std::string_view rstrip(std::string_view s, std::string_view chars) {
  using namespace py_text_detail;
  return rstrip_if(s, [chars](char32_t c) { return contains_cp(chars, c); });
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int count) {
  using namespace py_text_detail;
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    int n = 0;
    std::size_t i = 0;
    for (; i < s.size() && (count < 0 || n < count); ++n) {
      out += with;
      const std::size_t len = decode_at(s, i).length;
      out += s.substr(i, len);
      i += len;
    }
    if (i >= s.size() && (count < 0 || n < count))
      out += with;
    out += s.substr(i);
    return out;
  }
  std::size_t start = 0;
  int n = 0;
  while (count < 0 || n < count) {
    const std::size_t at = s.find(old, start);
    if (at == std::string_view::npos)
      break;
    out += s.substr(start, at - start);
    out += with;
    start = at + old.size();
    ++n;
  }
  out += s.substr(start);
  return out;
}

bool isdigit(std::string_view s) {
  using namespace py_text_detail;
  return all_of_cps(s, [](char32_t c) { return digit(c); });
}
bool isdecimal(std::string_view s) {
  using namespace py_text_detail;
  return all_of_cps(s, [](char32_t c) { return decimal(c); });
}
bool isalnum(std::string_view s) {
  using namespace py_text_detail;
  return all_of_cps(s, [](char32_t c) { return alnum(c); });
}
bool isalpha(std::string_view s) {
  using namespace py_text_detail;
  return all_of_cps(s, [](char32_t c) { return alpha(c); });
}

std::optional<long long> to_int(std::string_view s) {
  using namespace py_text_detail;
  // int() skips ASCII whitespace without \x1c-\x1f, and Unicode whitespace beyond ASCII.
  auto blank = [](char32_t c) {
    return c < 0x80 ? c == ' ' || (c >= 0x09 && c <= 0x0D) : space(c);
  };
  const std::u32string t = utf32_of(rstrip_if(lstrip_if(s, blank), blank));
  std::size_t i = 0;
  bool negative = false;
  if (i < t.size() && (t[i] == U'+' || t[i] == U'-'))
    negative = t[i++] == U'-';
  if (i >= t.size())
    return std::nullopt;
  unsigned long long magnitude = 0;
  const unsigned long long limit =
      negative ? static_cast<unsigned long long>(std::numeric_limits<long long>::max()) + 1
               : static_cast<unsigned long long>(std::numeric_limits<long long>::max());
  bool previous_digit = false;
  for (; i < t.size(); ++i) {
    if (t[i] == U'_') {
      // One underscore between two digits.
      if (!previous_digit || i + 1 >= t.size() || decimal_value(t[i + 1]) < 0)
        return std::nullopt;
      previous_digit = false;
      continue;
    }
    const int v = decimal_value(t[i]);
    if (v < 0)
      return std::nullopt;
    if (magnitude > (limit - static_cast<unsigned long long>(v)) / 10)
      return std::nullopt;
    magnitude = magnitude * 10 + static_cast<unsigned long long>(v);
    previous_digit = true;
  }
  if (negative)
    return magnitude == limit ? std::numeric_limits<long long>::min()
                              : -static_cast<long long>(magnitude);
  return static_cast<long long>(magnitude);
}

std::size_t length(std::string_view s) {
  using namespace py_text_detail;
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); i += decode_at(s, i).length)
    ++n;
  return n;
}

std::string_view slice(std::string_view s, long long start, std::optional<long long> stop) {
  using namespace py_text_detail;
  const auto n = static_cast<long long>(length(s));
  auto clamp = [n](long long v) {
    if (v < 0)
      v += n;
    return std::clamp(v, 0LL, n);
  };
  const long long a = clamp(start);
  const long long b = stop ? clamp(*stop) : n;
  if (b <= a)
    return s.substr(0, 0);
  // Walk to the byte offsets of code points a and b.
  std::size_t i = 0;
  long long k = 0;
  std::size_t from = s.size();
  while (i < s.size()) {
    if (k == a)
      from = i;
    if (k == b)
      return s.substr(from, i - from);
    i += decode_at(s, i).length;
    ++k;
  }
  return s.substr(from);
}

// --- re -----------------------------------------------------------------------------------------

namespace py_text_detail {
using Names = std::map<std::string, std::size_t, std::less<>>;
}  // namespace py_text_detail

struct Regex::Impl {
  py_text_detail::BoostRegex re;
  std::size_t groups = 0;
  py_text_detail::Names names;

  // Searches subject's UTF-32 text from code point `at` (earlier text still seen by lookbehinds
  // and \b).
  bool run(const py_text_detail::Utf32& subject, std::size_t at, py_text_detail::BoostMatch& m,
           boost::regex_constants::match_flag_type flags) const {
    const char32_t* base = subject.text.data();
    const char32_t* end = base + subject.text.size();
    try {
      return boost::regex_search(base + at, end, m, re, flags, base);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string("regular expression too complex for this input: ") +
                               e.what());
    }
  }

  // re's search from `at`; must_advance (after an empty match there): a match must not be empty
  // at `at` itself.
  bool search(const py_text_detail::Utf32& subject, std::size_t at, bool must_advance,
              py_text_detail::BoostMatch& m) const {
    namespace rc = boost::regex_constants;
    if (!must_advance)
      return run(subject, at, m, rc::match_default);
    if (run(subject, at, m, rc::match_continuous | rc::match_not_null))
      return true;
    return at < subject.text.size() && run(subject, at + 1, m, rc::match_default);
  }

  static std::pair<std::size_t, std::size_t> span(const py_text_detail::Utf32& subject,
                                                  const boost::sub_match<const char32_t*>& g) {
    const char32_t* base = subject.text.data();
    return {subject.offsets[static_cast<std::size_t>(g.first - base)],
            subject.offsets[static_cast<std::size_t>(g.second - base)]};
  }

  static Match build(const std::shared_ptr<const Impl>& impl, const py_text_detail::BoostMatch& m,
                     std::string_view s, const py_text_detail::Utf32& subject) {
    Match out;
    out.text_ = s;
    out.names_ = std::shared_ptr<const void>(impl, &impl->names);
    const std::size_t n = impl->groups + 1;
    out.groups_.resize(n);
    out.spans_.assign(n, {std::string_view::npos, std::string_view::npos});
    for (std::size_t g = 0; g < n && g < m.size(); ++g) {
      if (!m[g].matched)
        continue;
      const auto [b, e] = span(subject, m[g]);
      out.groups_[g] = s.substr(b, e - b);
      out.spans_[g] = {b, e};
    }
    return out;
  }
};

namespace py_text_detail {

inline std::size_t code_point_index(const Utf32& subject, std::size_t byte_pos) {
  auto it = std::lower_bound(subject.offsets.begin(), subject.offsets.end(), byte_pos);
  return static_cast<std::size_t>(it - subject.offsets.begin());
}

}  // namespace py_text_detail

std::optional<std::string_view> Match::group(std::size_t n) const {
  if (n >= groups_.size())
    throw std::out_of_range("no such group");
  return groups_[n];
}

std::string_view Match::str(std::size_t n) const {
  return group(n).value_or(std::string_view());
}

std::optional<std::string_view> Match::group(std::string_view name) const {
  using namespace py_text_detail;
  const auto* names = static_cast<const Names*>(names_.get());
  if (names) {
    auto it = names->find(name);
    if (it != names->end())
      return group(it->second);
  }
  throw std::out_of_range("no such group");
}

std::size_t Match::groups() const noexcept {
  return groups_.empty() ? 0 : groups_.size() - 1;
}

std::size_t Match::start(std::size_t n) const {
  if (n >= spans_.size())
    throw std::out_of_range("no such group");
  return spans_[n].first;
}

std::size_t Match::end(std::size_t n) const {
  if (n >= spans_.size())
    throw std::out_of_range("no such group");
  return spans_[n].second;
}

Regex::Regex(std::string_view pattern, unsigned flags) {
  using namespace py_text_detail;
  Translation t = Translator(utf32_of(pattern), flags).run();
  auto impl = std::make_shared<Impl>();
  namespace rc = boost::regex_constants;
  rc::syntax_option_type options = rc::perl | rc::mod_s | rc::no_mod_m;
  if (t.flags & ignorecase)
    options |= rc::icase;
  try {
    impl->re.assign(t.pattern.data(), t.pattern.data() + t.pattern.size(), options);
  } catch (const boost::regex_error& e) {
    throw std::invalid_argument(std::string("pattern not supported: ") + e.what());
  }
  impl->groups = t.groups;
  impl->names = std::move(t.names);
  impl_ = std::move(impl);
}

Regex::~Regex() = default;
Regex::Regex(const Regex&) = default;
Regex& Regex::operator=(const Regex&) = default;

std::optional<Match> Regex::match(std::string_view s, std::size_t pos) const {
  using namespace py_text_detail;
  const Utf32 subject = to_utf32(s);
  BoostMatch m;
  if (!impl_->run(subject, code_point_index(subject, pos), m,
                  boost::regex_constants::match_continuous))
    return std::nullopt;
  return Impl::build(impl_, m, s, subject);
}

std::optional<Match> Regex::search(std::string_view s, std::size_t pos) const {
  using namespace py_text_detail;
  const Utf32 subject = to_utf32(s);
  BoostMatch m;
  if (!impl_->search(subject, code_point_index(subject, pos), false, m))
    return std::nullopt;
  return Impl::build(impl_, m, s, subject);
}

std::optional<Match> Regex::fullmatch(std::string_view s, std::size_t pos) const {
  using namespace py_text_detail;
  const Utf32 subject = to_utf32(s);
  BoostMatch m;
  if (!impl_->run(subject, code_point_index(subject, pos), m,
                  boost::regex_constants::match_continuous | boost::regex_constants::match_all))
    return std::nullopt;
  if (m[0].second != subject.text.data() + subject.text.size())
    return std::nullopt;
  return Impl::build(impl_, m, s, subject);
}

std::vector<Match> Regex::finditer(std::string_view s) const {
  using namespace py_text_detail;
  const Utf32 subject = to_utf32(s);
  std::vector<Match> out;
  std::size_t at = 0;
  bool must_advance = false;
  BoostMatch m;
  while (at <= subject.text.size() && impl_->search(subject, at, must_advance, m)) {
    out.push_back(Impl::build(impl_, m, s, subject));
    const auto b = static_cast<std::size_t>(m[0].first - subject.text.data());
    const auto e = static_cast<std::size_t>(m[0].second - subject.text.data());
    must_advance = e == b;
    at = e;
  }
  return out;
}

std::vector<Match> Regex::findall(std::string_view s) const {
  std::vector<Match> out = finditer(s);
  if (impl_->groups == 1) {
    // Python's item is the group itself (or "" when it did not take part).
    for (Match& m : out) {
      m.groups_[0] = m.groups_[1].value_or(s.substr(0, 0));
      m.spans_[0] = m.groups_[1] ? m.spans_[1] : std::pair<std::size_t, std::size_t>{0, 0};
    }
  }
  return out;
}

namespace py_text_detail {

/// re's replacement template, parsed as re parses it.
inline std::vector<TemplatePart> parse_template(std::string_view repl, std::size_t groups,
                                                const Names& names) {
  std::vector<TemplatePart> parts;
  std::string literal;
  auto flush = [&] {
    if (!literal.empty())
      parts.push_back({std::move(literal), std::nullopt});
    literal.clear();
  };
  auto add_group = [&](std::size_t g) {
    if (g > groups)
      bad_pattern("invalid group reference " + std::to_string(g));
    flush();
    parts.push_back({std::string(), g});
  };
  const std::u32string t = utf32_of(repl);
  std::size_t i = 0;
  auto is_oct = [](char32_t c) { return c >= '0' && c <= '7'; };
  while (i < t.size()) {
    const char32_t c0 = t[i++];
    if (c0 != U'\\') {
      append_utf8(literal, c0);
      continue;
    }
    if (i >= t.size())
      bad_pattern("bad escape (end of pattern)");
    const char32_t c = t[i++];
    if (c == U'g') {
      if (i >= t.size() || t[i] != U'<')
        bad_pattern("missing <");
      ++i;
      std::u32string name;
      for (;;) {
        if (i >= t.size()) {
          if (name.empty())
            bad_pattern("missing group name");
          bad_pattern("missing >, unterminated name");
        }
        const char32_t ch = t[i++];
        if (ch == U'>')
          break;
        name += ch;
      }
      if (name.empty())
        bad_pattern("missing group name");
      std::string utf8name;
      for (char32_t ch : name)
        append_utf8(utf8name, ch);
      bool identifier = !name.empty();
      for (std::size_t k = 0; k < name.size(); ++k)
        if (!(name[k] == U'_' || alpha(name[k]) || (k > 0 && alnum(name[k]))))
          identifier = false;
      if (identifier) {
        auto it = names.find(utf8name);
        if (it == names.end())
          throw std::out_of_range("unknown group name '" + utf8name + "'");
        add_group(it->second);
      } else {
        std::size_t g = 0;
        for (char32_t ch : name) {
          const int v = decimal_value(ch);
          if (v < 0)
            bad_pattern("bad character in group name '" + utf8name + "'");
          g = g * 10 + static_cast<std::size_t>(v);
          if (g > (1u << 30))
            bad_pattern("invalid group reference " + utf8name);
        }
        add_group(g);
      }
    } else if (c == U'0') {
      unsigned v = 0;
      for (int k = 0; k < 2 && i < t.size() && is_oct(t[i]); ++k)
        v = v * 8 + (t[i++] - U'0');
      append_utf8(literal, v & 0xFF);
    } else if (ascii_digit(c)) {
      std::size_t g = c - U'0';
      bool octal = false;
      if (i < t.size() && ascii_digit(t[i])) {
        const char32_t c2 = t[i++];
        if (is_oct(c) && is_oct(c2) && i < t.size() && is_oct(t[i])) {
          const unsigned v = (c - U'0') * 64 + (c2 - U'0') * 8 + (t[i++] - U'0');
          if (v > 0377)
            bad_pattern("octal escape value outside of range 0-0o377");
          append_utf8(literal, v);
          octal = true;
        } else {
          g = g * 10 + (c2 - U'0');
        }
      }
      if (!octal)
        add_group(g);
    } else {
      char32_t v = 0;
      switch (c) {
        case U'a':
          v = 7;
          break;
        case U'b':
          v = 8;
          break;
        case U'f':
          v = 12;
          break;
        case U'n':
          v = 10;
          break;
        case U'r':
          v = 13;
          break;
        case U't':
          v = 9;
          break;
        case U'v':
          v = 11;
          break;
        case U'\\':
          v = U'\\';
          break;
        default:
          if (c < 0x80 && ascii_alpha(c))
            bad_pattern(std::string("bad escape \\") + static_cast<char>(c));
          literal += '\\';
          v = c;
          break;
      }
      append_utf8(literal, v);
    }
  }
  flush();
  return parts;
}

}  // namespace py_text_detail

std::string Regex::sub(std::string_view replacement, std::string_view s, int count) const {
  using namespace py_text_detail;
  std::vector<TemplatePart> parts;
  if (replacement.find('\\') == std::string_view::npos)
    parts.push_back({std::string(replacement), std::nullopt});
  else
    parts = parse_template(replacement, impl_->groups, impl_->names);
  const Utf32 subject = to_utf32(s);
  std::string out;
  std::size_t at = 0;
  std::size_t copied = 0;  // bytes of s already in out
  bool must_advance = false;
  int n = 0;
  BoostMatch m;
  while ((count == 0 || n < count) && at <= subject.text.size() &&
         impl_->search(subject, at, must_advance, m)) {
    const auto b = static_cast<std::size_t>(m[0].first - subject.text.data());
    const auto e = static_cast<std::size_t>(m[0].second - subject.text.data());
    out.append(s.substr(copied, subject.offsets[b] - copied));
    for (const TemplatePart& part : parts) {
      if (!part.group) {
        out += part.literal;
      } else if (m[*part.group].matched) {
        const auto [gb, ge] = Impl::span(subject, m[*part.group]);
        out.append(s.substr(gb, ge - gb));
      }
    }
    copied = subject.offsets[e];
    must_advance = e == b;
    at = e;
    ++n;
  }
  out.append(s.substr(copied));
  return out;
}

std::vector<std::string> Regex::split(std::string_view s, int maxsplit) const {
  using namespace py_text_detail;
  const Utf32 subject = to_utf32(s);
  std::vector<std::string> out;
  std::size_t at = 0;
  std::size_t last = 0;  // bytes
  bool must_advance = false;
  int n = 0;
  BoostMatch m;
  while ((maxsplit == 0 || n < maxsplit) && at <= subject.text.size() &&
         impl_->search(subject, at, must_advance, m)) {
    const auto b = static_cast<std::size_t>(m[0].first - subject.text.data());
    const auto e = static_cast<std::size_t>(m[0].second - subject.text.data());
    out.emplace_back(s.substr(last, subject.offsets[b] - last));
    for (std::size_t g = 1; g <= impl_->groups; ++g) {
      if (!m[g].matched) {
        out.emplace_back();
        continue;
      }
      const auto [gb, ge] = Impl::span(subject, m[g]);
      out.emplace_back(s.substr(gb, ge - gb));
    }
    last = subject.offsets[e];
    must_advance = e == b;
    at = e;
    ++n;
  }
  out.emplace_back(s.substr(last));
  return out;
}

}  // namespace rex::swebench::py
