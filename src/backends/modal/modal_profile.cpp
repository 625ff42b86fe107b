#include <rex/backends/modal/modal_profile.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace rex {

namespace {

// One line of the file, read left to right; every refusal names the file and the line.
class LineReader {
 public:
  LineReader(std::string_view line, std::string_view file, std::size_t number)
      : s_(line), file_(file), number_(number) {}

  [[noreturn]] void fail(std::string_view what) const {
    throw DeploymentConfigError(fmt::format("{}, line {}: {}", file_, number_, what));
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t'))
      ++i_;
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  bool starts_with(std::string_view p) const { return s_.substr(i_).starts_with(p); }
  void take(char c, std::string_view what) {
    if (peek() != c)
      fail(fmt::format("expected '{}' {}", c, what));
    ++i_;
  }

  // Nothing but blanks and a comment left.
  void finish() {
    skip_space();
    if (!at_end() && peek() != '#')
      fail(fmt::format("unexpected text after the value: {}", clip(s_.substr(i_))));
    for (std::size_t j = i_; j < s_.size(); ++j)
      check_char(s_[j], "a comment");
  }

  // A bare name (letters, digits, '_', '-') or a quoted one; a dotted name is refused.
  std::string key(std::string_view where) {
    skip_space();
    std::string name;
    if (peek() == '"') {
      name = basic_string();
    } else if (peek() == '\'') {
      name = literal_string();
    } else {
      const std::size_t start = i_;
      while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) != 0 || peek() == '_' ||
                           peek() == '-'))
        ++i_;
      if (i_ == start)
        fail(fmt::format("expected a name {}", where));
      name.assign(s_.substr(start, i_ - start));
    }
    skip_space();
    if (peek() == '.')
      fail("dotted names are not read here (a profile is one table of plain keys)");
    return name;
  }

  ModalTomlValue value() {
    skip_space();
    ModalTomlValue v;
    if (starts_with("\"\"\"") || starts_with("'''"))
      fail("multi-line strings are not read here");
    if (peek() == '"') {
      v.text = basic_string();
      return v;
    }
    if (peek() == '\'') {
      v.text = literal_string();
      return v;
    }
    if (peek() == '[' || peek() == '{')
      fail("arrays and inline tables are not read here (strings, booleans and numbers are)");
    const std::size_t start = i_;
    while (!at_end() && peek() != ' ' && peek() != '\t' && peek() != '#')
      ++i_;
    const std::string_view word = s_.substr(start, i_ - start);
    if (word.empty())
      fail("a key without a value");
    if (word == "true" || word == "false") {
      v.kind = ModalTomlValue::Kind::boolean;
      v.flag = word == "true";
      v.text.assign(word);
      return v;
    }
    if (!is_number(word))
      fail(fmt::format("{} is not a string, a boolean or a number", clip(word)));
    v.kind = ModalTomlValue::Kind::number;
    v.text.assign(word);
    return v;
  }

 private:
  static std::string clip(std::string_view text) {
    std::string out(text.substr(0, 40));
    if (text.size() > 40)
      out += "...";
    return out;
  }

  void check_char(char c, std::string_view where) const {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f)
      fail(fmt::format("a control character (0x{:02x}) in {}", u, where));
  }

  // "...": escapes \b \t \n \f \r \" \\ \uXXXX \UXXXXXXXX.
  std::string basic_string() {
    take('"', "to open a string");
    std::string out;
    for (;;) {
      if (at_end())
        fail("a string without its closing quote");
      const char c = s_[i_++];
      if (c == '"')
        return out;
      if (c != '\\') {
        check_char(c, "a string");
        out.push_back(c);
        continue;
      }
      if (at_end())
        fail("a string without its closing quote");
      const char e = s_[i_++];
      switch (e) {
        case 'b':
          out.push_back('\b');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case 'u':
          append_scalar(out, hex(4));
          break;
        case 'U':
          append_scalar(out, hex(8));
          break;
        default:
          fail(fmt::format("an unknown escape \\{} in a string", e));
      }
    }
  }

  // '...': taken as it is.
  std::string literal_string() {
    take('\'', "to open a string");
    const std::size_t start = i_;
    while (!at_end() && peek() != '\'') {
      check_char(peek(), "a string");
      ++i_;
    }
    if (at_end())
      fail("a string without its closing quote");
    std::string out(s_.substr(start, i_ - start));
    ++i_;
    return out;
  }

  std::uint32_t hex(int digits) {
    std::uint32_t code = 0;
    for (int d = 0; d < digits; ++d) {
      if (at_end() || std::isxdigit(static_cast<unsigned char>(peek())) == 0)
        fail(fmt::format("\\{} needs {} hex digits", digits == 4 ? 'u' : 'U', digits));
      const char c = s_[i_++];
      code = code * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(c))
                                                        ? c - '0'
                                                        : (std::tolower(c) - 'a' + 10));
    }
    return code;
  }

  void append_scalar(std::string& out, std::uint32_t code) const {
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
      fail(fmt::format("U+{:X} is not a Unicode scalar value", code));
    append_utf8(out, static_cast<char32_t>(code));
  }

  // TOML's numbers: decimal integers and floats (underscores between digits), 0x/0o/0b
  // integers, inf and nan, signed or not.
  static bool is_number(std::string_view w) {
    if (!w.empty() && (w[0] == '+' || w[0] == '-'))
      w.remove_prefix(1);
    if (w == "inf" || w == "nan")
      return true;
    auto digits = [](std::string_view d, auto is_digit) {
      if (d.empty() || !is_digit(d.front()) || !is_digit(d.back()))
        return false;
      for (std::size_t k = 0; k < d.size(); ++k)
        if (!is_digit(d[k]) && !(d[k] == '_' && is_digit(d[k - 1]) && is_digit(d[k + 1])))
          return false;
      return true;
    };
    auto dec = [](char c) { return c >= '0' && c <= '9'; };
    if (w.size() > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'o' || w[1] == 'b')) {
      const char base = w[1];
      return digits(w.substr(2), [base](char c) {
        if (base == 'x')
          return std::isxdigit(static_cast<unsigned char>(c)) != 0;
        if (base == 'o')
          return c >= '0' && c <= '7';
        return c == '0' || c == '1';
      });
    }
    std::string_view mantissa = w, exponent;
    if (const auto e = w.find_first_of("eE"); e != std::string_view::npos) {
      mantissa = w.substr(0, e);
      exponent = w.substr(e + 1);
      if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-'))
        exponent.remove_prefix(1);
      if (!digits(exponent, dec))
        return false;
    }
    const auto dot = mantissa.find('.');
    if (dot == std::string_view::npos)
      return digits(mantissa, dec);
    return digits(mantissa.substr(0, dot), dec) && digits(mantissa.substr(dot + 1), dec);
  }

  std::string_view s_;
  std::string_view file_;
  std::size_t number_;
  std::size_t i_ = 0;
};

}  // namespace

ModalToml parse_modal_toml(std::string_view text, std::string_view file) {
  ModalToml out;
  std::map<std::string, ModalTomlValue>* table = nullptr;
  std::size_t number = 0;
  if (text.starts_with("\xEF\xBB\xBF"))
    text.remove_prefix(3);
  while (!text.empty()) {
    ++number;
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.ends_with('\r'))
      line.remove_suffix(1);
    LineReader r(line, file, number);
    r.skip_space();
    if (r.at_end() || r.peek() == '#') {
      r.finish();
      continue;
    }
    if (r.peek() == '[') {
      r.take('[', "");
      if (r.peek() == '[')
        r.fail("arrays of tables are not read here (a profile is one [name] table)");
      std::string name = r.key("in a [table] line");
      r.take(']', "to close the table's name");
      r.finish();
      const auto [it, added] = out.try_emplace(std::move(name));
      if (!added)
        r.fail(fmt::format("the table [{}] is there twice", it->first));
      table = &it->second;
      continue;
    }
    std::string key = r.key("before '='");
    r.take('=', "after a key");
    ModalTomlValue value = r.value();
    r.finish();
    if (table == nullptr)
      r.fail(
          fmt::format("{} is outside a [profile] table: Modal's settings are tables, one "
                      "per profile",
                      key));
    const auto [it, added] = table->try_emplace(std::move(key), std::move(value));
    if (!added)
      r.fail(fmt::format("the key {} is there twice", it->first));
  }
  return out;
}

std::optional<ModalProfile> find_modal_profile(const EnvLookup& env) {
  auto get = [&env](const char* name) { return env(name).value_or(std::string()); };
  if (get("MODAL_IS_REMOTE") == "1")
    return std::nullopt;
  std::string path = get("MODAL_CONFIG_PATH");
  if (path.empty()) {
    const std::string home = get("HOME");
    if (home.empty())
      return std::nullopt;
    path = (std::filesystem::path(home) / ".modal.toml").string();
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof())
    throw DeploymentConfigError(
        fmt::format("modal: cannot read {}: {}", path, std::strerror(errno)));
  const ModalToml toml = parse_modal_toml(text.str(), path);

  std::vector<std::string> active;
  for (const auto& [name, keys] : toml) {
    const auto it = keys.find("active");
    if (it != keys.end() && it->second.kind == ModalTomlValue::Kind::boolean && it->second.flag)
      active.push_back(name);
  }
  if (active.size() > 1)
    throw DeploymentConfigError(fmt::format(
        "modal: {}: more than one profile is active ({}): mark one with `active = true`", path,
        fmt::join(active, ", ")));
  const std::string chosen = get("MODAL_PROFILE");
  const std::string name = !chosen.empty() ? chosen : active.empty() ? "default" : active.front();
  if (name == "default" && active.empty() && toml.size() > 1)
    throw DeploymentConfigError(
        fmt::format("modal: {}: no profile is active among its {}: set MODAL_PROFILE, or mark one "
                    "with `active = true` (`modal profile activate NAME`)",
                    path, toml.size()));
  ModalProfile profile{name, path, {}};
  const auto it = toml.find(name);
  if (it == toml.end()) {
    if (!chosen.empty())
      throw DeploymentConfigError(
          fmt::format("modal: MODAL_PROFILE is {}, and {} has no such profile", name, path));
    return profile;
  }
  for (const auto& [key, value] : it->second)
    profile.settings.emplace(key, value.text);
  return profile;
}

}  // namespace rex
