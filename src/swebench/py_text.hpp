// Python's str and re semantics over UTF-8 text, for the log parsers: a parser written with these
// reads like swebench's and gives what it gives on every input, non-ASCII text included (Python's
// \s, \d, \w, str.split() and str.strip() know Unicode whitespace, digits and letters; `.` is one
// code point).
//
// Text is UTF-8 as swebench sees it (valid: invalid bytes were replaced before). Results are views
// into the argument unless they are built (replace, sub).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex::swebench::py {

// --- UTF-8 --------------------------------------------------------------------------------------

/// The code point starting at byte i of s (i < s.size()) and its length in bytes; an invalid byte
/// reads as U+FFFD, one byte long.
struct CodePoint {
  char32_t value;
  std::size_t length;
};
CodePoint decode_utf8(std::string_view s, std::size_t i) noexcept;

/// Appends c as UTF-8.
void append_utf8(std::string& out, char32_t c);

// --- str ----------------------------------------------------------------------------------------

/// str.isspace() of one code point (Python's definition: Unicode whitespace and \x1c-\x1f).
bool is_space(char32_t c) noexcept;

/// s.split(sep) / s.split(sep, maxsplit); sep not empty.
std::vector<std::string_view> split(std::string_view s, std::string_view sep, int maxsplit = -1);
/// s.split() / s.split(None, maxsplit): runs of whitespace, no empty pieces.
std::vector<std::string_view> split(std::string_view s);
std::vector<std::string_view> split_ws(std::string_view s, int maxsplit);
/// s.rsplit(sep, maxsplit).
std::vector<std::string_view> rsplit(std::string_view s, std::string_view sep, int maxsplit = -1);
/// s.splitlines() / s.splitlines(True): \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029.
std::vector<std::string_view> splitlines(std::string_view s, bool keepends = false);

/// s.strip() / lstrip() / rstrip(): Unicode whitespace.
std::string_view strip(std::string_view s);
std::string_view lstrip(std::string_view s);
std::string_view rstrip(std::string_view s);
/// s.strip(chars) / lstrip(chars) / rstrip(chars): any code point of chars.
std::string_view strip(std::string_view s, std::string_view chars);
std::string_view lstrip(std::string_view s, std::string_view chars);
std::string_view rstrip(std::string_view s, std::string_view chars);

/// s.replace(old, new) / s.replace(old, new, count).
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int count = -1);

/// str.isdigit() / isdecimal() / isalnum() / isalpha() of a whole string (false when empty).
bool isdigit(std::string_view s);
bool isdecimal(std::string_view s);
bool isalnum(std::string_view s);
bool isalpha(std::string_view s);

/// int(s) for a str: surrounding whitespace (as int() knows it: not \x1c-\x1f), a sign,
/// underscores between digits and any Unicode decimal digits allowed; nullopt where Python raises
/// ValueError (or beyond 64 bits).
std::optional<long long> to_int(std::string_view s);

/// len(s) in code points; s[start:stop] with Python's negative and out-of-range indices, counted
/// in code points.
std::size_t length(std::string_view s);
std::string_view slice(std::string_view s, long long start, std::optional<long long> stop = {});

// --- re -----------------------------------------------------------------------------------------

/// re's flags that the parsers use.
enum Flags : unsigned {
  none = 0,
  ignorecase = 1u << 0,  // re.I
  multiline = 1u << 1,   // re.M
  dotall = 1u << 2,      // re.S
  verbose = 1u << 3,     // re.X
};

class Regex;

/// A match: group(0) is the whole. A group that did not take part is nullopt (Python's None).
/// group(), str(), start() and end() throw std::out_of_range for a group the pattern does not
/// have (Python's IndexError). start()/end() of a group that did not take part are npos.
class Match {
 public:
  std::optional<std::string_view> group(std::size_t n = 0) const;
  /// group(n), or "" for a group that did not take part (what m.group(n) or "" gives).
  std::string_view str(std::size_t n = 0) const;
  /// A named group ((?P<name>...)).
  std::optional<std::string_view> group(std::string_view name) const;
  std::size_t groups() const noexcept;         // the pattern's group count (m.groups() length)
  std::size_t start(std::size_t n = 0) const;  // byte offsets into the searched text
  std::size_t end(std::size_t n = 0) const;

 private:
  friend class Regex;
  std::vector<std::optional<std::string_view>> groups_;
  std::vector<std::pair<std::size_t, std::size_t>> spans_;
  std::shared_ptr<const void> names_;  // the pattern's group names
  std::string_view text_;
};

/// A compiled pattern with Python's re semantics (syntax as re takes it: (?P<name>...), \Z, ...).
/// Throws std::invalid_argument for a pattern it cannot take (re.error, and the few things it does
/// not support: \N{...}, the ASCII flag). Searches have no step limit (a pathological pattern
/// takes the time it takes in Python); std::runtime_error only if one needs over 1 GB of
/// backtracking state. `pos` is a byte offset into s (Python's counts code points).
/// Known differences from re, none in what the parsers use: with `ignorecase`, ranges inside sets
/// compare case-folded ends (Python differs for a few non-ASCII letters); a counted repeat of a
/// group that can match empty ("(a|b*?){2}") may leave a different last capture when the match is
/// forced to backtrack into it; a capture made inside a lookahead, an atomic group or a possessive
/// repeat is kept (Boost's behaviour) where Python drops it because the match backtracked out of
/// an enclosing group ("(?:(?=(a))b)?" on "ac": group 1 is "a" here, None in Python).
class Regex {
 public:
  explicit Regex(std::string_view pattern, unsigned flags = none);
  ~Regex();
  Regex(const Regex&);
  Regex& operator=(const Regex&);

  std::optional<Match> match(std::string_view s, std::size_t pos = 0) const;      // re.match
  std::optional<Match> search(std::string_view s, std::size_t pos = 0) const;     // re.search
  std::optional<Match> fullmatch(std::string_view s, std::size_t pos = 0) const;  // re.fullmatch
  std::vector<Match> finditer(std::string_view s) const;                          // re.finditer
  /// re.findall: with no group the whole matches (group(0)); with one group that group (as both
  /// group(0) and group(1); str() gives "" where it did not take part, as findall does); with
  /// several the groups of each match in one Match (str(1..n)).
  std::vector<Match> findall(std::string_view s) const;
  /// re.sub with a replacement template (\1, \g<name>, \n ... as re expands them); count 0 = all
  /// (a negative count replaces nothing, as in Python).
  /// A bad template throws std::invalid_argument (std::out_of_range for an unknown group name).
  std::string sub(std::string_view replacement, std::string_view s, int count = 0) const;
  /// re.split (captured groups included, as re does; a group that did not take part is "");
  /// maxsplit 0 = all, negative = none.
  std::vector<std::string> split(std::string_view s, int maxsplit = 0) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace rex::swebench::py
