// The gateway's files as text, all parsed here with one strict reader so that every file says
// the same thing about the same mistake: the --config file (parse_gateway_config), the
// registry's environment files (parse_environment) and its data files (parse_data_file); and
// the checks of a whole configuration. Pure: no I/O. Reading the files from disk (Registry::load,
// load_gateway_config) lives in registry.cpp, beside the one helper that reads them.
//
// Every message is "SOURCE:LINE: FIELD: PROBLEM". The line is that of the field's key (yaml-cpp
// marks a null value on the token after it), or of the list element at fault.
#include <rex/backends/backends.hpp>
#include <rex/core/text.hpp>
#include <rex/deployment/sizes.hpp>
#include <rex/gateway/gateway_config.hpp>
#include <rex/gateway/registry.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <utility>

namespace rex::gateway {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxDepth = 64;              // nesting of a data file
constexpr std::size_t kMaxDataValues = 1'000'000;  // values of a data file, aliases expanded
constexpr std::size_t kMaxShownBytes = 60;         // of a value quoted in a message
constexpr std::size_t kMaxSocketPathBytes = 107;   // sockaddr_un's sun_path, less its NUL
constexpr std::string_view kNameRule =
    "1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit";

// ---------------------------------------------------------------------------------------------
// Checks shared by the parsers and validate(): each says what is wrong, or nothing.

// [A-Za-z0-9][A-Za-z0-9._-]{0,62}, in ASCII whatever the locale.
bool valid_name(std::string_view name) {
  const auto allowed = [](char c, bool first) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    return alnum || (!first && (c == '.' || c == '_' || c == '-'));
  };
  if (name.empty() || name.size() > 63 || !allowed(name[0], true))
    return false;
  return std::all_of(name.begin() + 1, name.end(), [&](char c) { return allowed(c, false); });
}

// `text` as a JSON string literal, shortened (on a character boundary) when long.
std::string json_quoted(std::string_view text) {
  if (text.size() <= kMaxShownBytes)
    return json::serialize(json::value(json::string_view(text.data(), text.size())));
  std::size_t cut = kMaxShownBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  std::string shown = json::serialize(json::value(json::string_view(text.data(), cut)));
  shown.insert(shown.size() - 1, "...");
  return shown;
}

std::optional<std::string> key_problem(std::string_view key) {
  if (key.empty())
    return "a key must not be empty";
  const bool clean = std::none_of(key.begin(), key.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte == 0x7F;
  });
  if (!clean)
    return "a key must not contain whitespace or control characters";
  return std::nullopt;
}

std::optional<std::string> listen_problem(std::string_view listen) {
  const auto unusable = [&] {
    return fmt::format("expected HOST:PORT, [IPV6]:PORT or unix:PATH, got {}", json_quoted(listen));
  };
  if (listen.starts_with("unix:")) {
    const std::string_view path = listen.substr(5);
    if (path.empty() || path.find('\0') != std::string_view::npos)
      return unusable();
    if (path.size() > kMaxSocketPathBytes)
      return fmt::format("a socket path has at most {} bytes, got {}", kMaxSocketPathBytes,
                         json_quoted(path));
    return std::nullopt;
  }
  const auto colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return unusable();
  std::string_view host = listen.substr(0, colon);
  const std::string_view port = listen.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']')
      return unusable();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return fmt::format("an IPv6 address goes in brackets ([::1]:8000), got {}",
                       json_quoted(listen));
  }
  const bool host_ok = std::none_of(host.begin(), host.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte == 0x7F || c == '/' || c == '[' || c == ']';
  });
  unsigned number = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  const bool port_ok = !port.empty() && port.size() <= 5 && ec == std::errc() &&
                       end == port.data() + port.size() && number <= 65535;
  if (!host_ok || !port_ok)
    return unusable();
  return std::nullopt;
}

enum class Bound { non_negative, positive };

// `shown` is the number as written, for the message.
std::optional<std::string> range_problem(double value, Bound bound, std::string_view shown) {
  if (!std::isfinite(value))
    return fmt::format("must be finite, got {}", shown);
  if (value < 0)
    return fmt::format("must not be negative, got {}", shown);
  if (bound == Bound::positive && value == 0)
    return fmt::format("must be more than 0, got {}", shown);
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// The reader: a value with the path and line that name it.

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return json_quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

std::string location(std::string_view source, const YAML::Mark& mark) {
  if (mark.is_null())
    return std::string(source);
  return fmt::format("{}:{}", source, mark.line + 1);
}

struct Field {
  std::string_view source;
  std::string path;  // "idle_timeout", "tenants[0].keys[1]"; "" for the document itself
  YAML::Node node;
  YAML::Mark mark;  // where to point

  [[noreturn]] void fail(std::string_view problem) const {
    if (path.empty())
      throw GatewayConfigError(fmt::format("{}: {}", location(source, mark), problem));
    throw GatewayConfigError(fmt::format("{}: {}: {}", location(source, mark), path, problem));
  }
  [[noreturn]] void expected(std::string_view what) const {
    fail(fmt::format("expected {}, got {}", what, describe(node)));
  }

  Field element(std::size_t index, const YAML::Node& value) const {
    const YAML::Mark at = value.IsNull() || value.Mark().is_null() ? mark : value.Mark();
    return Field{source, fmt::format("{}[{}]", path, index), value, at};
  }
  Field member(std::string_view key, const YAML::Node& key_node, const YAML::Node& value) const {
    const YAML::Mark at = key_node.Mark().is_null() ? mark : key_node.Mark();
    return Field{source, path.empty() ? std::string(key) : fmt::format("{}.{}", path, key), value,
                 at};
  }
};

// A mapping's entries, each key a scalar given once. Named fields are take()n; finish() refuses
// any key nobody took, listing the ones that were asked for.
class Mapping {
 public:
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
  };

  // `what` says what the mapping holds ("environment fields"); null is an empty mapping.
  Mapping(Field field, std::string_view what) : field_(std::move(field)) {
    if (field_.node.IsNull())
      return;
    if (!field_.node.IsMap())
      field_.expected(fmt::format("a mapping of {}", what));
    std::set<std::string, std::less<>> seen;
    for (const auto& pair : field_.node) {
      const YAML::Node& key = pair.first;
      if (!key.IsScalar()) {
        Field{field_.source, field_.path, key, key.Mark().is_null() ? field_.mark : key.Mark()}
            .expected("a name as the key");
      }
      if (!seen.insert(key.Scalar()).second)
        field_.member(key.Scalar(), key, pair.second).fail("given twice");
      entries_.push_back(Entry{key.Scalar(), key, pair.second});
    }
    taken_.assign(entries_.size(), false);
  }

  const std::vector<Entry>& entries() const { return entries_; }
  Field member(const Entry& entry) const {
    return field_.member(entry.key, entry.key_node, entry.value);
  }

  std::optional<Field> take(std::string_view key) {
    known_.emplace_back(key);
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].key == key) {
        taken_[i] = true;
        return member(entries_[i]);
      }
    }
    return std::nullopt;
  }

  void finish() const {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (!taken_[i])
        member(entries_[i]).fail(fmt::format("unknown field (known: {})", fmt::join(known_, ", ")));
    }
  }

 private:
  Field field_;
  std::vector<Entry> entries_;
  std::vector<bool> taken_;
  std::vector<std::string> known_;
};

// Refuses text that is not UTF-8 (yaml-cpp passes stray bytes through, and JSON cannot carry
// them), naming the line of the first bad byte.
void require_utf8(std::string_view text, std::string_view source) {
  const std::string valid = rex::utf8_backslashreplace(text);
  if (valid == text)
    return;
  const auto bad = std::mismatch(text.begin(), text.end(), valid.begin(), valid.end()).first;
  const auto line = 1 + std::count(text.begin(), bad, '\n');
  throw GatewayConfigError(fmt::format("{}:{}: not UTF-8 text", source, line));
}

// Where a document's root starts, and whether it is null (an empty document).
class RootProbe : public YAML::EventHandler {
 public:
  bool null_root = true;
  YAML::Mark mark = YAML::Mark::null_mark();

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& at, YAML::anchor_t) override { root(at, true); }
  void OnAlias(const YAML::Mark& at, YAML::anchor_t) override { root(at, false); }
  void OnScalar(const YAML::Mark& at, const std::string&, YAML::anchor_t,
                const std::string&) override {
    root(at, false);
  }
  void OnSequenceStart(const YAML::Mark& at, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    root(at, false);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& at, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    root(at, false);
  }
  void OnMapEnd() override {}

 private:
  void root(const YAML::Mark& at, bool null) {
    if (seen_)
      return;
    seen_ = true;
    null_root = null;
    mark = at;
  }
  bool seen_ = false;
};

// The document of a file that holds one; an empty text is a null document. Not YAML::LoadAll:
// yaml-cpp 0.7's loops for ever, growing, on some malformed streams such as ",:&x a["
// (jbeder/yaml-cpp#1040, fixed upstream by stopping at the first empty document). So the first
// document is loaded alone, and a second pass looks at the next one only: a non-empty second
// document is refused, and an empty one ends the stream, as upstream now does.
Field load_document(std::string_view text, std::string_view source) {
  require_utf8(text, source);
  // YAML has no NUL characters, and yaml-cpp takes NULs among the first bytes for UTF-16 or
  // UTF-32, whose decoding lets through what is not a character.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw GatewayConfigError(fmt::format("{}:{}: a NUL byte (YAML text has none)", source,
                                         1 + std::count(text.begin(), text.begin() + nul, '\n')));
  }
  const std::string copy(text);
  YAML::Node root;
  try {
    root = YAML::Load(copy);
    std::istringstream stream(copy);
    YAML::Parser parser(stream);
    RootProbe first;
    RootProbe second;
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second) && !second.null_root)
      Field{source, "", YAML::Node(), second.mark}.fail(
          "a second YAML document (a file holds one)");
  } catch (const YAML::Exception& e) {
    throw GatewayConfigError(fmt::format("{}: invalid YAML: {}", location(source, e.mark), e.msg));
  }
  return Field{source, "", root, root.Mark()};
}

bool plain(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() == "?";
}

// A plain scalar's number, YAML's .inf and .nan included; none for anything else.
std::optional<double> number_of(const YAML::Node& node) {
  if (!plain(node))
    return std::nullopt;
  const std::string text = ascii_lower(node.Scalar());
  if (text == ".inf" || text == "+.inf")
    return HUGE_VAL;
  if (text == "-.inf")
    return -HUGE_VAL;
  if (text == ".nan")
    return std::nan("");
  std::string_view digits = text;
  if (digits.starts_with('+'))
    digits.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || digits.starts_with('+') || end != digits.data() + digits.size())
    return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves `value` alone: a negative exponent underflowed, anything else overflowed.
    const auto exponent = digits.find_first_of("eE");
    if (exponent != std::string_view::npos && digits.substr(exponent + 1).starts_with('-'))
      return 0.0;
    return digits.starts_with('-') ? -HUGE_VAL : HUGE_VAL;
  }
  if (ec != std::errc())
    return std::nullopt;
  return value;
}

std::string read_string(const Field& field) {
  if (!field.node.IsScalar())
    field.expected("a string");
  return field.node.Scalar();
}

bool read_bool(const Field& field) {
  const std::string text = field.node.IsScalar() ? field.node.Scalar() : std::string();
  if (text == "true" || text == "True" || text == "TRUE")
    return true;
  if (text == "false" || text == "False" || text == "FALSE")
    return false;
  field.expected("true or false");
  return false;
}

std::string read_nonempty_string(const Field& field) {
  std::string text = read_string(field);
  if (text.empty())
    field.fail("must not be empty");
  return text;
}

std::string read_name(const Field& field, std::string_view what) {
  if (!field.node.IsScalar() || !valid_name(field.node.Scalar()))
    field.expected(fmt::format("{} of {}", what, kNameRule));
  return field.node.Scalar();
}

double read_number(const Field& field, std::string_view what, Bound bound) {
  const std::optional<double> value = number_of(field.node);
  if (!value)
    field.expected(what);
  if (auto problem = range_problem(*value, bound, field.node.Scalar()))
    field.fail(*problem);
  return *value;
}

std::uint64_t read_whole(const Field& field, std::string_view what) {
  if (!plain(field.node))
    field.expected(what);
  const std::string& text = field.node.Scalar();
  std::string_view digits = text;
  if (digits.starts_with('+'))
    digits.remove_prefix(1);
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  const bool whole = !digits.empty() && end == digits.data() + digits.size();
  if (whole && ec == std::errc())
    return value;
  if (whole && ec == std::errc::result_out_of_range)
    field.fail(fmt::format("too large, got {}", text));
  if (const auto number = number_of(field.node); number && *number < 0)
    field.fail(fmt::format("must not be negative, got {}", text));
  field.expected(what);
}

// docker's size forms ("512m", "2g", "1048576"), through the one parser the deployments use.
std::optional<std::uint64_t> size_of(std::string_view text) {
  try {
    const std::int64_t bytes = rex::parse_size(text, "size");
    if (bytes >= 0)
      return static_cast<std::uint64_t>(bytes);
  } catch (const DeploymentConfigError&) {
  }
  return std::nullopt;
}

std::uint64_t read_bytes(const Field& field) {
  if (plain(field.node)) {
    std::string_view digits = field.node.Scalar();
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (!digits.empty() && end == digits.data() + digits.size() && ec == std::errc())
      return value;
  }
  if (field.node.IsScalar()) {
    if (const auto bytes = size_of(field.node.Scalar()))
      return *bytes;
  }
  field.expected("a number of bytes or a size such as 512m or 10g");
}

std::vector<std::string> read_strings(const Field& field, bool nonempty) {
  std::vector<std::string> out;
  if (field.node.IsNull())
    return out;
  if (!field.node.IsSequence())
    field.expected("a list of strings");
  for (std::size_t i = 0; i < field.node.size(); ++i) {
    const Field item = field.element(i, field.node[i]);
    out.push_back(nonempty ? read_nonempty_string(item) : read_string(item));
  }
  return out;
}

std::map<std::string, std::string> read_variables(const Field& field) {
  std::map<std::string, std::string> out;
  const Mapping variables(field, "variables to their values");
  for (const auto& entry : variables.entries()) {
    const Field value = variables.member(entry);
    if (entry.key.empty() || entry.key.find('=') != std::string::npos ||
        entry.key.find('\0') != std::string::npos)
      value.fail("a variable's name must be non-empty, without '=' or NUL");
    out.emplace(entry.key, read_string(value));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// YAML data to JSON.

// YAML 1.2's core schema for a plain scalar: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+.
std::optional<json::value> integer_of(std::string_view text) {
  int base = 10;
  std::string_view digits = text;
  if (text.starts_with("0x") || text.starts_with("0o")) {
    base = text[1] == 'x' ? 16 : 8;
    digits.remove_prefix(2);
    std::uint64_t value = 0;
    const auto [end, ec] =
        std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (digits.empty() || end != digits.data() + digits.size() || ec != std::errc())
      return std::nullopt;
    if (value <= static_cast<std::uint64_t>(INT64_MAX))
      return json::value(static_cast<std::int64_t>(value));
    return json::value(value);
  }
  if (digits.starts_with('+'))
    digits.remove_prefix(1);  // from_chars takes a '-' only
  const std::string_view unsigned_digits =
      digits.starts_with('-') && !text.starts_with('+') ? digits.substr(1) : digits;
  if (unsigned_digits.empty() || !std::all_of(unsigned_digits.begin(), unsigned_digits.end(),
                                              [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int64_t value = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), value).ec == std::errc())
    return json::value(value);
  std::uint64_t large = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), large).ec == std::errc())
    return json::value(large);
  return std::nullopt;  // beyond 64 bits: a float
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, finite.
std::optional<double> float_of(std::string_view text) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
      ++i;
    return i - start;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-'))
    ++i;
  const std::size_t number_start = i;
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0)
    return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-'))
      ++i;
    if (digits() == 0)
      return std::nullopt;
  }
  if (i != text.size())
    return std::nullopt;
  double value = 0;
  const bool negative = text.starts_with('-');
  const std::string_view unsigned_text = text.substr(number_start);
  const auto [end, ec] =
      std::from_chars(unsigned_text.data(), unsigned_text.data() + unsigned_text.size(), value);
  if (ec != std::errc() || end != unsigned_text.data() + unsigned_text.size() ||
      !std::isfinite(value))
    return std::nullopt;  // out of range: kept as the text
  return negative ? -value : value;
}

json::value plain_scalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
    return nullptr;
  if (text == "true" || text == "True" || text == "TRUE")
    return true;
  if (text == "false" || text == "False" || text == "FALSE")
    return false;
  if (auto integer = integer_of(text))
    return *integer;
  if (auto number = float_of(text))
    return *number;
  return json::string(text);  // .inf and .nan too: JSON has no such numbers
}

class DataConverter {
 public:
  json::value convert(const Field& field, std::size_t depth) {
    if (++values_ > kMaxDataValues)
      field.fail(fmt::format("more than {} values (aliases expanded)", kMaxDataValues));
    if (depth > kMaxDepth)
      field.fail(fmt::format("nested more than {} levels deep", kMaxDepth));
    const YAML::Node& node = field.node;
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return plain(node) ? plain_scalar(node.Scalar()) : json::value(json::string(node.Scalar()));
      case YAML::NodeType::Sequence: {
        json::array array;
        array.reserve(node.size());
        for (std::size_t i = 0; i < node.size(); ++i)
          array.push_back(convert(field.element(i, node[i]), depth + 1));
        return array;
      }
      case YAML::NodeType::Map: {
        json::object object;
        const Mapping mapping(field, "values");
        for (const auto& entry : mapping.entries())
          object.emplace(entry.key, convert(mapping.member(entry), depth + 1));
        return object;
      }
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        break;
    }
    return nullptr;
  }

 private:
  std::size_t values_ = 0;
};

json::value parse_json_text(std::string_view text, std::string_view source) {
  json::parse_options options;
  options.max_depth = kMaxDepth;
  json::stream_parser parser({}, options);
  boost::system::error_code ec;
  const std::size_t used = parser.write(text.data(), text.size(), ec);
  if (!ec)
    parser.finish(ec);
  if (ec) {
    const auto line =
        1 + std::count(text.begin(), text.begin() + std::min(used, text.size()), '\n');
    throw GatewayConfigError(fmt::format("{}:{}: invalid JSON: {}", source, line, ec.message()));
  }
  return parser.release();
}

// ---------------------------------------------------------------------------------------------
// The configuration's parts.

// A provider's section: its YAML as the JSON of the backend's settings, read by the backend
// table's codec. A plain scalar goes in as the type YAML gives it, except where the setting is a
// string (`api_key: 1234` is the text "1234"). The codec's message names "type.field"; it is
// shown at that field's line.
DeploymentConfig read_provider(const Field& field, const Backend& backend) {
  const Mapping section(field, fmt::format("{} settings", backend.title));
  const json::object strings =
      backend.encode(backend.decode(json::object(), settings::Reader::Use::defaults));
  json::object fields;
  DataConverter converter;
  for (const auto& entry : section.entries()) {
    const Field member = section.member(entry);
    const json::value* known = strings.if_contains(entry.key);
    if (known != nullptr && known->is_string() && plain(entry.value))
      fields.emplace(entry.key, json::string(entry.value.Scalar()));
    else
      fields.emplace(entry.key, converter.convert(member, 1));
  }
  try {
    return provider_settings(backend, std::move(fields));
  } catch (const DeploymentConfigError& e) {
    // At the line of the field at fault; at the section's for one it does not spell out (a
    // check across fields, a field named by its other name).
    for (const auto& entry : section.entries()) {
      if (!e.field().empty() && entry.key == e.field())
        section.member(entry).fail(e.problem());
    }
    if (!e.field().empty())
      field.fail(fmt::format("{}: {}", e.field(), e.problem()));
    const std::string_view message = e.what();
    const std::string prefix = std::string(backend.name) + ".";
    field.fail(message.starts_with(prefix) ? message.substr(prefix.size()) : message);
  }
}

TenantConfig read_tenant(const Field& field) {
  Mapping fields(field, "tenant fields");
  TenantConfig tenant;
  if (auto f = fields.take("name"))
    tenant.name = read_name(*f, "a tenant name");
  else
    field.fail("a tenant needs a name");
  if (auto f = fields.take("keys"))
    tenant.keys = read_strings(*f, false);  // checked with the other tenants' (check_tenants)
  if (auto f = fields.take("max_sessions"); f && !f->node.IsNull())
    tenant.max_sessions = read_whole(*f, "a whole number of sessions");
  if (auto f = fields.take("creates_per_minute"); f && !f->node.IsNull())
    tenant.creates_per_minute =
        read_number(*f, "a number of creates per minute", Bound::non_negative);
  if (auto f = fields.take("max_storage_bytes"); f && !f->node.IsNull())
    tenant.max_storage_bytes = read_bytes(*f);
  fields.finish();
  return tenant;
}

// Tenant names valid and given once, keys valid and given once. The callbacks throw, naming
// tenant i, or key j of tenant i, their own way (a file's line, or a field path).
template <class FailAtTenant, class FailAtKey>
void check_tenants(const std::vector<TenantConfig>& tenants, FailAtTenant fail_at_tenant,
                   FailAtKey fail_at_key) {
  std::map<std::string_view, std::size_t> names;
  std::map<std::string_view, std::size_t> owners;  // key -> tenant index
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const TenantConfig& tenant = tenants[i];
    if (!valid_name(tenant.name))
      fail_at_tenant(i, fmt::format("expected a tenant name of {}, got {}", kNameRule,
                                    json_quoted(tenant.name)));
    if (!names.emplace(tenant.name, i).second)
      fail_at_tenant(i, fmt::format("the tenant {} is defined twice", json_quoted(tenant.name)));
    for (std::size_t j = 0; j < tenant.keys.size(); ++j) {
      if (auto problem = key_problem(tenant.keys[j]))
        fail_at_key(i, j, *problem);
      const auto [owner, added] = owners.emplace(tenant.keys[j], i);
      if (!added) {
        fail_at_key(i, j,
                    owner->second == i ? std::string("this key is listed twice")
                                       : fmt::format("this key already belongs to the tenant {}",
                                                     json_quoted(tenants[owner->second].name)));
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

GatewayConfig parse_gateway_config(std::string_view yaml_text, std::string_view source) {
  const Field root = load_document(yaml_text, source);
  Mapping fields(root, "gateway settings");
  GatewayConfig config;
  if (auto f = fields.take("listen")) {
    config.listen = read_string(*f);
    if (auto problem = listen_problem(config.listen))
      f->fail(*problem);
  }
  if (auto f = fields.take("storage"))
    config.storage = read_nonempty_string(*f);
  if (auto f = fields.take("registry"))
    config.registry = read_string(*f);
  if (auto f = fields.take("python_image"))
    config.python_image = read_nonempty_string(*f);
  std::optional<Field> tenants_field = fields.take("tenants");
  if (tenants_field && !tenants_field->node.IsNull()) {
    if (!tenants_field->node.IsSequence())
      tenants_field->expected("a list of tenants");
    for (std::size_t i = 0; i < tenants_field->node.size(); ++i)
      config.tenants.push_back(read_tenant(tenants_field->element(i, tenants_field->node[i])));
  }
  if (auto f = fields.take("max_sessions"))
    config.max_sessions = read_whole(*f, "a whole number of sessions");
  if (auto f = fields.take("creates_per_minute"))
    config.creates_per_minute =
        read_number(*f, "a number of creates per minute", Bound::non_negative);
  if (auto f = fields.take("max_storage_bytes"))
    config.max_storage_bytes = read_bytes(*f);
  const auto seconds = [&](std::string_view key, double& out, Bound bound) {
    if (auto f = fields.take(key))
      out = read_number(*f, "a number of seconds", bound);
  };
  seconds("idle_timeout", config.idle_timeout, Bound::non_negative);
  seconds("max_lifetime", config.max_lifetime, Bound::positive);
  seconds("orphan_grace", config.orphan_grace, Bound::non_negative);
  seconds("sweep_interval", config.sweep_interval, Bound::positive);
  seconds("drift_interval", config.drift_interval, Bound::positive);
  if (auto f = fields.take("docker_engine"))
    config.docker_engine = read_string(*f);
  if (auto f = fields.take("podman_engine"))
    config.podman_engine = read_string(*f);
  for (const Backend& backend : backends()) {
    if (backend.open == nullptr || backend.name == "docker")
      continue;  // docker and podman: docker_engine and podman_engine
    if (auto f = fields.take(backend.name); f && !f->node.IsNull())
      config.providers.emplace(backend.name, read_provider(*f, backend));
  }
  for (const MissingBackend& missing : missing_backends()) {
    if (auto f = fields.take(missing.name); f && !f->node.IsNull())
      f->fail(fmt::format("the {} backend is not in this build: {}", missing.name, missing.reason));
  }
  fields.finish();

  // Names and keys across tenants, at the line of the second occurrence.
  const auto tenant_field = [&](std::size_t i) {
    const Field tenant = tenants_field->element(i, tenants_field->node[i]);
    const YAML::Node& name = tenant.node["name"];
    return Field{source, tenant.path + ".name", name,
                 name.Mark().is_null() ? tenant.mark : name.Mark()};
  };
  check_tenants(
      config.tenants,
      [&](std::size_t i, const std::string& problem) { tenant_field(i).fail(problem); },
      [&](std::size_t i, std::size_t j, const std::string& problem) {
        const Field tenant = tenants_field->element(i, tenants_field->node[i]);
        const YAML::Node& keys = tenant.node["keys"];
        const Field keys_field{source, tenant.path + ".keys", keys, keys.Mark()};
        keys_field.element(j, keys[j]).fail(problem);
      });
  return config;
}

void add_api_key(GatewayConfig& config, std::string_view flag) {
  std::string_view tenant_name = "default";
  std::string_view key = flag;
  if (const auto eq = flag.find('='); eq != std::string_view::npos) {
    tenant_name = flag.substr(0, eq);
    key = flag.substr(eq + 1);
    if (!valid_name(tenant_name))
      throw GatewayConfigError(
          fmt::format("--api-key: expected TENANT=KEY with a tenant name of {}, got the tenant {}",
                      kNameRule, json_quoted(tenant_name)));
    // "c2VjcmV0==" is a base64 key with its padding, not the key "=" of a tenant "c2VjcmV0".
    if (!key.empty() && key.find_first_not_of('=') == std::string_view::npos)
      throw GatewayConfigError(fmt::format(
          "--api-key: the key after {}= is only '=' characters (give a key with '=' in it as "
          "TENANT=KEY, such as default=KEY)",
          json_quoted(tenant_name)));
  }
  if (auto problem = key_problem(key))
    throw GatewayConfigError(fmt::format("--api-key: {}", *problem));
  TenantConfig* target = nullptr;
  for (TenantConfig& tenant : config.tenants) {
    const bool holds = std::find(tenant.keys.begin(), tenant.keys.end(), key) != tenant.keys.end();
    if (tenant.name == tenant_name) {
      if (holds)
        return;
      target = &tenant;
    } else if (holds) {
      throw GatewayConfigError(
          fmt::format("--api-key: the key given for the tenant {} already belongs to the tenant {}",
                      json_quoted(tenant_name), json_quoted(tenant.name)));
    }
  }
  if (target == nullptr) {
    target = &config.tenants.emplace_back();
    target->name = tenant_name;
  }
  target->keys.emplace_back(key);
}

void validate(const GatewayConfig& config) {
  const auto fail = [](std::string_view field, std::string_view problem) {
    throw GatewayConfigError(fmt::format("gateway config: {}: {}", field, problem));
  };
  if (auto problem = listen_problem(config.listen))
    fail("listen", *problem);
  if (config.storage.empty())
    fail("storage", "must not be empty");
  if (config.python_image.empty())
    fail("python_image", "must not be empty");
  const auto number = [&](std::string_view field, double value, Bound bound) {
    if (auto problem = range_problem(value, bound, fmt::format("{}", value)))
      fail(field, *problem);
  };
  number("creates_per_minute", config.creates_per_minute, Bound::non_negative);
  number("idle_timeout", config.idle_timeout, Bound::non_negative);
  number("max_lifetime", config.max_lifetime, Bound::positive);
  number("orphan_grace", config.orphan_grace, Bound::non_negative);
  number("sweep_interval", config.sweep_interval, Bound::positive);
  number("drift_interval", config.drift_interval, Bound::positive);
  for (std::size_t i = 0; i < config.tenants.size(); ++i) {
    if (const auto& rate = config.tenants[i].creates_per_minute)
      number(fmt::format("tenants[{}].creates_per_minute", i), *rate, Bound::non_negative);
  }
  check_tenants(
      config.tenants,
      [&](std::size_t i, const std::string& problem) {
        fail(fmt::format("tenants[{}].name", i), problem);
      },
      [&](std::size_t i, std::size_t j, const std::string& problem) {
        fail(fmt::format("tenants[{}].keys[{}]", i, j), problem);
      });
}

const TenantConfig* tenant_of_key(const GatewayConfig& config, std::string_view key) {
  for (const TenantConfig& tenant : config.tenants) {
    if (std::find(tenant.keys.begin(), tenant.keys.end(), key) != tenant.keys.end())
      return &tenant;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The registry's files (declared in registry.hpp).

Environment parse_environment(std::string_view yaml_text, std::string_view source,
                              std::string_view stem) {
  const Field root = load_document(yaml_text, source);
  Mapping fields(root, "environment fields");
  Environment env;
  if (auto f = fields.take("name")) {
    env.name = read_name(*f, "an environment name");
  } else {
    if (!valid_name(stem))
      Field{source, "name", YAML::Node(), YAML::Mark::null_mark()}.fail(
          fmt::format("expected an environment name of {}, got the file's name {}", kNameRule,
                      json_quoted(stem)));
    env.name = stem;
  }
  if (auto f = fields.take("description"))
    env.description = read_string(*f);
  if (auto f = fields.take("provider"))
    env.provider = read_name(*f, "a provider name (local, docker, podman...)");
  if (auto f = fields.take("image"))
    env.image = read_string(*f);
  if (auto f = fields.take("template"))
    env.e2b_template = read_string(*f);
  if (auto f = fields.take("memory"); f && !f->node.IsNull()) {
    if (!f->node.IsScalar() || !size_of(f->node.Scalar()))
      f->expected("a size such as 512m or 2g");
    env.memory = f->node.Scalar();
  }
  if (auto f = fields.take("cpus"); f && !f->node.IsNull())
    env.cpus = read_number(*f, "a number of CPUs", Bound::positive);
  if (auto f = fields.take("network"))
    env.network = read_string(*f);
  if (auto f = fields.take("env"))
    env.env = read_variables(*f);
  if (auto f = fields.take("working_dir"))
    env.working_dir = read_string(*f);
  if (auto f = fields.take("mounts"))
    env.mounts = read_strings(*f, true);
  if (auto f = fields.take("idle_timeout"))
    env.idle_timeout = read_number(*f, "a number of seconds", Bound::non_negative);
  if (auto f = fields.take("max_lifetime"))
    env.max_lifetime = read_number(*f, "a number of seconds", Bound::non_negative);
  if (auto f = fields.take("collect"))
    env.collect = read_strings(*f, true);
  if (auto f = fields.take("spares")) {
    const std::uint64_t n = read_whole(*f, "a whole number of sandboxes");
    if (n > kMaxSpares)
      f->fail(fmt::format("at most {} sandboxes may be kept ahead of time, got {}", kMaxSpares, n));
    env.spares = static_cast<std::size_t>(n);
  }
  if (auto f = fields.take("user"))
    env.user = read_string(*f);
  if (auto f = fields.take("start_cmd"))
    env.start_cmd = read_string(*f);
  if (auto f = fields.take("ready_cmd"))
    env.ready_cmd = read_string(*f);
  if (auto f = fields.take("code_interpreter"))
    env.code_interpreter = read_bool(*f);
  fields.finish();
  return env;
}

json::value parse_data_file(std::string_view text, std::string_view source,
                            std::string_view extension) {
  const std::string lower = ascii_lower(extension);
  if (lower == ".yaml" || lower == ".yml") {
    DataConverter converter;
    return converter.convert(load_document(text, source), 0);
  }
  if (lower == ".json")
    return parse_json_text(text, source);
  require_utf8(text, source);
  return json::string(text);
}

}  // namespace rex::gateway
