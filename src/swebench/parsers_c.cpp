// swebench's parsers for C and C++ repositories' test logs (redis/valkey's test runner, jq,
// nlohmann/json's doctest XML report, micropython's run-tests, googletest), as swebench 5.0.2's
// log_parsers/c.py reads them.
#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

#include "swebench/expat_tables.inc"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::swebench::parsers {
namespace c_detail {

namespace py = rex::swebench::py;

// --- xml.etree.ElementTree.fromstring, as far as parse_log_doctest sees it ----------------------
//
// The report is parsed the way Python's ElementTree parser (expat 2.5 with namespaces) does: the
// same documents are accepted, any other raises (LogParserError here). The tree keeps what the
// parser reads: each element's tag as ElementTree names it and its "name" and "success"
// attributes.

struct XmlElement {
  std::string tag;  // "{uri}local" in a namespace, else the local name
  std::optional<std::string> name;
  std::optional<std::string> success;
  std::vector<std::size_t> children;
};

class XmlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class XmlParser {
 public:
  explicit XmlParser(std::string_view text) : s_(text) {}

  /// The elements in document order (the root first); throws XmlError.
  std::vector<XmlElement> parse() {
    skip_misc();
    if (at_end())
      fail("no element found");
    if (s_[i_] != '<')
      fail("syntax error");
    parse_root();
    skip_misc();
    if (!at_end())
      fail("junk after document element");
    return std::move(elements_);
  }

 private:
  static constexpr std::string_view kXmlNamespace = "http://www.w3.org/XML/1998/namespace";
  static constexpr std::string_view kXmlnsNamespace = "http://www.w3.org/2000/xmlns/";

  // A namespace binding in scope: prefix ("" for the default namespace) -> URI.
  struct Binding {
    std::string prefix;
    std::string uri;
  };

  struct RawAttribute {
    std::string qname;
    std::string value;
  };

  struct Open {
    std::string qname;            // as written, for the end tag
    std::size_t element;          // index in elements_
    std::size_t bindings_before;  // bindings_ size before its declarations
  };

  [[noreturn]] static void fail(const char* what) { throw XmlError(what); }

  bool at_end() const { return i_ >= s_.size(); }
  bool next_is(std::string_view t) const { return s_.substr(i_).starts_with(t); }

  py::CodePoint peek() const { return py::decode_utf8(s_, i_); }

  static bool is_s(char32_t c) { return c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A; }

  static bool in(std::span<const py::tables::CodeRange> table, char32_t c) {
    auto it = std::upper_bound(table.begin(), table.end(), c,
                               [](char32_t v, const py::tables::CodeRange& r) { return v < r.lo; });
    return it != table.begin() && c <= std::prev(it)->hi;
  }
  static bool name_start(char32_t c) { return c < 0x10000 && in(py::tables::expat::name_start, c); }
  static bool name_char(char32_t c) {
    return c < 0x10000 &&
           (in(py::tables::expat::name_start, c) || in(py::tables::expat::name_char, c));
  }
  // A character expat takes in text, attribute values, comments, CDATA and PIs.
  static bool xml_char(char32_t c) {
    if (c == '&' || c == '<')
      return true;
    if (c >= 0x10000)
      return c <= 0x10FFFF;
    return in(py::tables::expat::text_char, c);
  }

  void skip_s() {
    while (!at_end() && is_s(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }

  // An NCName, or a QName (prefix:local) when qname.
  std::string name(bool qname) {
    const std::size_t start = i_;
    py::CodePoint c = at_end() ? py::CodePoint{0, 0} : peek();
    if (at_end() || !name_start(c.value))
      fail("not well-formed (invalid token)");
    i_ += c.length;
    bool colon = false;
    while (!at_end()) {
      c = peek();
      if (c.value == ':' && qname && !colon) {
        colon = true;
        i_ += 1;
        if (at_end())
          fail("unclosed token");
        const py::CodePoint after = peek();
        if (!name_start(after.value))
          fail("not well-formed (invalid token)");
        i_ += after.length;
        continue;
      }
      if (c.value == ':' || !name_char(c.value))
        break;
      i_ += c.length;
    }
    return std::string(s_.substr(start, i_ - start));
  }

  // A reference after '&' (consumed): a character reference or one of the five predefined
  // entities; appends what it stands for.
  void reference(std::string& out) {
    if (at_end())
      fail("unclosed token");
    if (s_[i_] == '#') {
      ++i_;
      std::uint32_t value = 0;
      std::size_t digits = 0;
      const bool hex = !at_end() && s_[i_] == 'x';
      if (hex)
        ++i_;
      while (!at_end() && s_[i_] != ';') {
        const char d = s_[i_];
        int v = -1;
        if (d >= '0' && d <= '9')
          v = d - '0';
        else if (hex && d >= 'a' && d <= 'f')
          v = d - 'a' + 10;
        else if (hex && d >= 'A' && d <= 'F')
          v = d - 'A' + 10;
        if (v < 0)
          fail("not well-formed (invalid token)");
        if (value < 0x110000)
          value = value * (hex ? 16 : 10) + static_cast<std::uint32_t>(v);
        ++digits;
        ++i_;
      }
      if (at_end())
        fail("unclosed token");
      if (digits == 0)
        fail("not well-formed (invalid token)");
      ++i_;  // ';'
      const char32_t c = value;
      const bool valid = value < 0x110000 && !(c >= 0xD800 && c <= 0xDFFF) && c != 0xFFFE &&
                         c != 0xFFFF && (c >= 0x20 || c == 0x09 || c == 0x0A || c == 0x0D);
      if (!valid)
        fail("reference to invalid character number");
      py::append_utf8(out, c);
      return;
    }
    const std::string entity = name(false);
    if (at_end())
      fail("unclosed token");
    if (s_[i_] != ';')
      fail("not well-formed (invalid token)");
    ++i_;
    if (entity == "lt")
      out += '<';
    else if (entity == "gt")
      out += '>';
    else if (entity == "amp")
      out += '&';
    else if (entity == "quot")
      out += '"';
    else if (entity == "apos")
      out += '\'';
    else
      fail("undefined entity");
  }

  // A quoted attribute value, normalized as expat does for CDATA attributes.
  std::string attribute_value() {
    if (at_end())
      fail("unclosed token");
    const char quote = s_[i_];
    if (quote != '"' && quote != '\'')
      fail("not well-formed (invalid token)");
    ++i_;
    std::string value;
    for (;;) {
      if (at_end())
        fail("unclosed token");
      const py::CodePoint c = peek();
      if (c.value == static_cast<unsigned char>(quote)) {
        ++i_;
        return value;
      }
      if (c.value == '<')
        fail("not well-formed (invalid token)");
      if (c.value == '&') {
        ++i_;
        reference(value);
        continue;
      }
      if (!xml_char(c.value))
        fail("not well-formed (invalid token)");
      if (c.value == '\r') {
        // A line end (\r\n or \r) and each tab or newline: one space.
        i_ += (i_ + 1 < s_.size() && s_[i_ + 1] == '\n') ? 2 : 1;
        value += ' ';
        continue;
      }
      if (c.value == '\n' || c.value == '\t')
        value += ' ';
      else
        value.append(s_.substr(i_, c.length));
      i_ += c.length;
    }
  }

  // "<!--" consumed: the rest of a comment.
  void comment() {
    for (;;) {
      if (at_end())
        fail("unclosed token");
      if (next_is("--")) {
        if (!next_is("-->"))
          fail("not well-formed (invalid token)");
        i_ += 3;
        return;
      }
      const py::CodePoint c = peek();
      if (!xml_char(c.value))
        fail("not well-formed (invalid token)");
      i_ += c.length;
    }
  }

  // "<?" consumed: a processing instruction.
  void processing_instruction() {
    const std::string target = name(false);
    if (target.size() == 3 && (target[0] == 'x' || target[0] == 'X') &&
        (target[1] == 'm' || target[1] == 'M') && (target[2] == 'l' || target[2] == 'L'))
      fail("XML or text declaration not at start of entity");
    if (next_is("?>")) {
      i_ += 2;
      return;
    }
    if (at_end())
      fail("unclosed token");
    if (!is_s(static_cast<unsigned char>(s_[i_])))
      fail("not well-formed (invalid token)");
    for (;;) {
      if (at_end())
        fail("unclosed token");
      if (next_is("?>")) {
        i_ += 2;
        return;
      }
      const py::CodePoint c = peek();
      if (!xml_char(c.value))
        fail("not well-formed (invalid token)");
      i_ += c.length;
    }
  }

  // "<![CDATA[" consumed.
  void cdata() {
    for (;;) {
      if (at_end())
        fail("unclosed CDATA section");
      if (next_is("]]>")) {
        i_ += 3;
        return;
      }
      const py::CodePoint c = peek();
      if (!xml_char(c.value))
        fail("not well-formed (invalid token)");
      i_ += c.length;
    }
  }

  // Whitespace, comments and PIs around the root element.
  void skip_misc() {
    for (;;) {
      skip_s();
      if (next_is("<!--")) {
        i_ += 4;
        comment();
      } else if (next_is("<?")) {
        i_ += 2;
        processing_instruction();
      } else {
        return;
      }
    }
  }

  std::optional<std::string_view> lookup(std::string_view prefix) const {
    if (prefix == "xml")
      return kXmlNamespace;
    for (auto it = bindings_.rbegin(); it != bindings_.rend(); ++it)
      if (it->prefix == prefix)
        return it->uri;
    return std::nullopt;
  }

  // expat's checks on a namespace declaration.
  static void check_binding(std::string_view prefix, bool is_default, std::string_view uri) {
    if (uri.empty() && !is_default)
      fail("unbinding of namespace prefix not allowed");  // XML_ERROR_UNDECLARING_PREFIX
    if (!is_default && prefix == "xmlns")
      fail("reserved prefix (xmlns) must not be declared or undeclared");
    const bool must_be_xml = !is_default && prefix == "xml";
    if (uri.find('}') != std::string_view::npos)
      fail("syntax error");  // the namespace separator in a URI
    const bool is_xml = uri == kXmlNamespace;
    if (must_be_xml != is_xml)
      fail(must_be_xml ? "reserved prefix (xml) must not be undeclared or bound to another "
                         "namespace name"
                       : "prefix must not be bound to one of the reserved namespace names");
    if (!must_be_xml && uri == kXmlnsNamespace)
      fail("prefix must not be bound to one of the reserved namespace names");
  }

  static std::pair<std::string_view, std::string_view> split_qname(std::string_view qname) {
    const std::size_t colon = qname.find(':');
    if (colon == std::string_view::npos)
      return {std::string_view(), qname};
    return {qname.substr(0, colon), qname.substr(colon + 1)};
  }

  // A start tag, '<' consumed; returns true when it was empty-element ("/>").
  bool start_tag(std::size_t parent, bool has_parent) {
    std::string qname = name(true);
    std::vector<RawAttribute> attributes;
    bool empty = false;
    for (;;) {
      if (at_end())
        fail("unclosed token");
      const char c = s_[i_];
      if (c == '>') {
        ++i_;
        break;
      }
      if (c == '/') {
        if (!next_is("/>"))
          fail("not well-formed (invalid token)");
        i_ += 2;
        empty = true;
        break;
      }
      if (!is_s(static_cast<unsigned char>(c)))
        fail("not well-formed (invalid token)");
      skip_s();
      if (at_end())
        fail("unclosed token");
      if (s_[i_] == '>' || s_[i_] == '/')
        continue;
      RawAttribute attribute;
      attribute.qname = name(true);
      skip_s();
      if (at_end())
        fail("unclosed token");
      if (s_[i_] != '=')
        fail("not well-formed (invalid token)");
      ++i_;
      skip_s();
      attribute.value = attribute_value();
      for (const RawAttribute& other : attributes)
        if (other.qname == attribute.qname)
          fail("duplicate attribute");
      attributes.push_back(std::move(attribute));
      // After a value: whitespace, '>' or "/>".
      if (at_end())
        fail("unclosed token");
      if (s_[i_] != '>' && s_[i_] != '/' && !is_s(static_cast<unsigned char>(s_[i_])))
        fail("not well-formed (invalid token)");
    }

    // Namespace declarations first, then the names they qualify.
    const std::size_t bindings_before = bindings_.size();
    for (const RawAttribute& a : attributes) {
      if (a.qname == "xmlns") {
        check_binding("", true, a.value);
        bindings_.push_back({"", a.value});
      } else if (a.qname.starts_with("xmlns:")) {
        const std::string prefix = a.qname.substr(6);
        check_binding(prefix, false, a.value);
        bindings_.push_back({prefix, a.value});
      }
    }
    XmlElement element;
    const auto [prefix, local] = split_qname(qname);
    if (!prefix.empty()) {
      const std::optional<std::string_view> uri = lookup(prefix);
      if (!uri)
        fail("unbound prefix");
      element.tag = "{" + std::string(*uri) + "}" + std::string(local);
    } else {
      const std::optional<std::string_view> uri = lookup("");
      element.tag =
          uri && !uri->empty() ? "{" + std::string(*uri) + "}" + std::string(local) : qname;
    }
    std::vector<std::pair<std::string, std::string>> expanded;  // (uri, local) of prefixed ones
    for (const RawAttribute& a : attributes) {
      if (a.qname == "xmlns" || a.qname.starts_with("xmlns:"))
        continue;
      const auto [aprefix, alocal] = split_qname(a.qname);
      if (aprefix.empty()) {
        if (a.qname == "name")
          element.name = a.value;
        else if (a.qname == "success")
          element.success = a.value;
        continue;
      }
      const std::optional<std::string_view> uri = lookup(aprefix);
      if (!uri)
        fail("unbound prefix");
      std::pair<std::string, std::string> key{std::string(*uri), std::string(alocal)};
      if (std::find(expanded.begin(), expanded.end(), key) != expanded.end())
        fail("duplicate attribute");
      expanded.push_back(std::move(key));
    }

    const std::size_t index = elements_.size();
    elements_.push_back(std::move(element));
    if (has_parent)
      elements_[parent].children.push_back(index);
    if (empty)
      bindings_.resize(bindings_before);
    else
      open_.push_back({std::move(qname), index, bindings_before});
    return empty;
  }

  // The root element and all its content.
  void parse_root() {
    ++i_;  // '<'
    if (start_tag(0, false))
      return;
    while (!open_.empty()) {
      if (at_end())
        fail("no element found");
      const py::CodePoint c = peek();
      if (c.value == '<') {
        if (next_is("</")) {
          i_ += 2;
          const std::string qname = name(true);
          skip_s();
          if (at_end())
            fail("unclosed token");
          if (s_[i_] != '>')
            fail("not well-formed (invalid token)");
          ++i_;
          if (qname != open_.back().qname)
            fail("mismatched tag");
          bindings_.resize(open_.back().bindings_before);
          open_.pop_back();
        } else if (next_is("<!--")) {
          i_ += 4;
          comment();
        } else if (next_is("<![CDATA[")) {
          i_ += 9;
          cdata();
        } else if (next_is("<?")) {
          i_ += 2;
          processing_instruction();
        } else if (next_is("<!")) {
          fail("syntax error");
        } else {
          ++i_;
          start_tag(open_.back().element, true);
        }
      } else if (c.value == '&') {
        ++i_;
        std::string ignored;
        reference(ignored);
      } else if (next_is("]]>")) {
        fail("not well-formed (invalid token)");
      } else {
        if (!xml_char(c.value))
          fail("not well-formed (invalid token)");
        i_ += c.length;
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::vector<XmlElement> elements_;
  std::vector<Binding> bindings_;
  std::vector<Open> open_;
};

// ElementPath's ".//tag" from an element: its descendants with that tag, in document order.
inline void descendants(const std::vector<XmlElement>& tree, std::size_t from, std::string_view tag,
                        std::vector<std::size_t>& out) {
  std::vector<std::size_t> stack(tree[from].children.rbegin(), tree[from].children.rend());
  while (!stack.empty()) {
    const std::size_t e = stack.back();
    stack.pop_back();
    if (tree[e].tag == tag)
      out.push_back(e);
    stack.insert(stack.end(), tree[e].children.rbegin(), tree[e].children.rend());
  }
}

inline std::vector<std::size_t> findall(const std::vector<XmlElement>& tree, std::size_t from,
                                        std::string_view tag) {
  std::vector<std::size_t> out;
  descendants(tree, from, tag, out);
  return out;
}

// The runner lines "STATUS name" the parsers below share: re.match on the stripped line.
template <class OnMatch>
void each_match(std::string_view log, const py::Regex& pattern, OnMatch on_match) {
  for (std::string_view line : py::split(log, "\n"))
    if (const std::optional<py::Match> m = pattern.match(py::strip(line)))
      on_match(*m);
}

}  // namespace c_detail

StatusMap parse_log_redis(std::string_view log, const ParseContext&) {
  using namespace c_detail;
  static const py::Regex pattern(R"(^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$)");
  static const py::Regex location(R"(\s+in\s+\S+$)");
  StatusMap map;
  each_match(log, pattern, [&](const py::Match& m) {
    const std::string_view outcome = m.str(1);
    if (outcome == "ok")
      map.set(m.str(2), status::passed);
    else if (outcome == "err")
      map.set(location.sub("", m.str(2)), status::failed);  // without "in <file>"
    else
      map.set(m.str(2), status::skipped);
  });
  return map;
}

StatusMap parse_log_jq(std::string_view log, const ParseContext&) {
  using namespace c_detail;
  static const py::Regex pattern(R"(^\s*(PASS|FAIL):\s(.+)$)");
  StatusMap map;
  each_match(log, pattern, [&](const py::Match& m) {
    map.set(m.str(2), m.str(1) == "PASS" ? status::passed : status::failed);
  });
  return map;
}

StatusMap parse_log_doctest(std::string_view log, const ParseContext&) {
  using namespace c_detail;
  // The report of a doctest binary run with -r=xml, from "<doctest" to the first "</doctest>".
  constexpr std::string_view start_tag = "<doctest";
  constexpr std::string_view end_tag = "</doctest>";
  StatusMap map;
  const std::size_t start = log.find(start_tag);
  if (start == std::string_view::npos)
    return map;
  const std::size_t end = log.find(end_tag, start);
  // Without an end tag swebench slices up to character 9, which leaves at most a piece of the
  // start tag (or nothing): ElementTree refuses that.
  if (end == std::string_view::npos)
    throw LogParserError("parse_log_doctest: ParseError: no complete <doctest> report");
  std::vector<XmlElement> tree;
  try {
    tree = XmlParser(log.substr(start, end + end_tag.size() - start)).parse();
  } catch (const XmlError& e) {
    throw LogParserError(std::string("parse_log_doctest: ParseError: ") + e.what());
  }
  for (std::size_t testcase : findall(tree, 0, "TestCase")) {
    const std::string testcase_name = tree[testcase].name.value_or("None");
    for (std::size_t subcase : findall(tree, testcase, "SubCase")) {
      const std::string name = testcase_name + " > " + tree[subcase].name.value_or("None");
      bool passed = true;
      for (std::size_t expression : findall(tree, subcase, "Expression"))
        if (tree[expression].success != "true")
          passed = false;
      map.set(name, passed ? status::passed : status::failed);
    }
  }
  return map;
}

StatusMap parse_log_micropython_test(std::string_view log, const ParseContext&) {
  using namespace c_detail;
  static const py::Regex pattern(R"(^(pass|FAIL|skip)\s+(.+)$)");
  StatusMap map;
  each_match(log, pattern, [&](const py::Match& m) {
    const std::string_view outcome = m.str(1);
    map.set(m.str(2), outcome == "pass"   ? status::passed
                      : outcome == "FAIL" ? status::failed
                                          : status::skipped);
  });
  return map;
}

StatusMap parse_log_googletest(std::string_view log, const ParseContext&) {
  using namespace c_detail;
  static const py::Regex pattern(R"(^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$)");
  StatusMap map;
  each_match(log, pattern, [&](const py::Match& m) {
    map.set(m.str(2), m.str(1) == "OK" ? status::passed : status::failed);
  });
  return map;
}

}  // namespace rex::swebench::parsers
