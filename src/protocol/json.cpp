// JSON mapping of the protocol types: one encoder and one decoder over Boost.Describe members,
// plus the rules the C++ types cannot express (required fields, enumerated strings, tags).
#include <rex/protocol/json.hpp>

#include <fmt/format.h>
#include <boost/describe/members.hpp>
#include <boost/json.hpp>
#include <boost/mp11/algorithm.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

// Every protocol type: gives each its name for error messages and its explicit instantiation.
#define REX_PROTOCOL_TYPES(X)  \
  X(CreateBashSessionRequest)  \
  X(CreateBashSessionResponse) \
  X(CloseBashSessionRequest)   \
  X(CloseBashSessionResponse)  \
  X(SessionInput)              \
  X(SessionAttach)             \
  X(SessionResize)             \
  X(SessionState)              \
  X(SessionNotCarried)         \
  X(CaptureSessionsRequest)    \
  X(CaptureSessionsResponse)   \
  X(RestoreSessionsRequest)    \
  X(RestoredSession)           \
  X(RestoreSessionsResponse)   \
  X(BashAction)                \
  X(BashInterruptAction)       \
  X(BashObservation)           \
  X(Command)                   \
  X(CommandResponse)           \
  X(ReadFileRequest)           \
  X(ReadFileResponse)          \
  X(WriteFileRequest)          \
  X(WriteFileResponse)         \
  X(UploadRequest)             \
  X(UploadResponse)            \
  X(DownloadRequest)           \
  X(DownloadResponse)          \
  X(IsAliveResponse)           \
  X(CloseResponse)             \
  X(ProcessConfig)             \
  X(ProcessInfo)               \
  X(ProcessListResponse)       \
  X(ProcessSelector)           \
  X(ProcessInput)              \
  X(ProcessSignal)             \
  X(ProcessResize)             \
  X(TerminalSize)              \
  X(ProcessEnd)

namespace rex {
namespace {

namespace json = boost::json;

template <class T>
concept Described = boost::describe::has_describe_members<T>::value;

template <class T>
constexpr std::string_view kTypeName{};
#define REX_TYPE_NAME(T) \
  template <>            \
  constexpr std::string_view kTypeName<T> = #T;
REX_PROTOCOL_TYPES(REX_TYPE_NAME)  // Action is named in decode_action
#undef REX_TYPE_NAME

// Fields SWE-ReX's models declare without a default: a request lacking them is meaningless.
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRequiredFields{{
    {"ProcessConfig", "argv"},
    {"BashAction", "command"},
    {"Command", "command"},
    {"ReadFileRequest", "path"},
    {"WriteFileRequest", "content"},
    {"WriteFileRequest", "path"},
    {"UploadRequest", "source_path"},
    {"UploadRequest", "target_path"},
    {"DownloadRequest", "path"},
    {"DownloadRequest", "target_path"},
}};

bool is_required(std::string_view type, std::string_view field) {
  return std::find(kRequiredFields.begin(), kRequiredFields.end(), std::pair{type, field}) !=
         kRequiredFields.end();
}

// `stdout` and `stderr` are macros, so those members carry a trailing underscore in C++ only.
std::string_view json_name(std::string_view member) {
  if (member.ends_with('_'))
    member.remove_suffix(1);
  return member;
}

std::string_view kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "integer";
    case json::kind::double_:
      return "float";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "unknown";
}

// Where a value sits, for messages ("BashAction.expect[2]"), and whether null is allowed there.
struct Field {
  std::string path;
  bool nullable = false;
};

[[noreturn]] void type_error(const Field& f, std::string_view expected, const json::value& got) {
  throw ProtocolError(fmt::format("{}: expected {}{}, got {}", f.path, expected,
                                  f.nullable ? " or null" : "", kind_name(got)));
}

void check_one_of(std::string_view path, std::string_view field, const std::string& value,
                  std::initializer_list<std::string_view> allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end())
    return;
  throw ProtocolError(fmt::format("{}.{}: expected one of {:?}, got {:?}", path, field,
                                  fmt::join(allowed, ", "), value));
}

// Decoders, one per shape. Declared up front because they call each other and the arguments'
// namespaces (std) would not let argument-dependent lookup find later ones.
void decode(const json::value& v, std::string& out, const Field& f);
void decode(const json::value& v, bool& out, const Field& f);
void decode(const json::value& v, double& out, const Field& f);
template <std::integral I>
void decode(const json::value& v, I& out, const Field& f);
template <class T>
void decode(const json::value& v, std::optional<T>& out, const Field& f);
template <class T>
void decode(const json::value& v, std::vector<T>& out, const Field& f);
template <class T>
void decode(const json::value& v, std::map<std::string, T>& out, const Field& f);
void decode(const json::value& v, std::variant<std::string, std::vector<std::string>>& out,
            const Field& f);
template <Described T>
void decode(const json::value& v, T& out, const Field& f);

void decode(const json::value& v, std::string& out, const Field& f) {
  if (!v.is_string())
    type_error(f, "a string", v);
  out = v.get_string();
}

void decode(const json::value& v, bool& out, const Field& f) {
  if (!v.is_bool())
    type_error(f, "a boolean", v);
  out = v.get_bool();
}

void decode(const json::value& v, double& out, const Field& f) {
  if (!v.is_number())
    type_error(f, "a number", v);  // integers are numbers too: 5 is 5.0
  out = v.to_number<double>();
  // A literal beyond a double's range (1e400) parses to infinity, which JSON cannot carry back
  // and no timeout or count can mean.
  if (!std::isfinite(out))
    throw ProtocolError(fmt::format("{}: number out of range", f.path));
}

template <std::integral I>
void decode(const json::value& v, I& out, const Field& f) {
  if (!v.is_int64() && !v.is_uint64())
    type_error(f, "an integer", v);
  const bool fits =
      v.is_int64() ? std::in_range<I>(v.get_int64()) : std::in_range<I>(v.get_uint64());
  if (!fits)
    throw ProtocolError(fmt::format("{}: integer out of range", f.path));
  out = v.is_int64() ? static_cast<I>(v.get_int64()) : static_cast<I>(v.get_uint64());
}

template <class T>
void decode(const json::value& v, std::optional<T>& out, const Field& f) {
  if (v.is_null()) {
    out.reset();
    return;
  }
  T value{};
  decode(v, value, Field{f.path, true});
  out = std::move(value);
}

template <class T>
void decode(const json::value& v, std::vector<T>& out, const Field& f) {
  if (!v.is_array())
    type_error(f, "an array", v);
  const json::array& items = v.get_array();
  out.clear();
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    decode(items[i], out.emplace_back(), Field{fmt::format("{}[{}]", f.path, i)});
  }
}

template <class T>
void decode(const json::value& v, std::map<std::string, T>& out, const Field& f) {
  if (!v.is_object())
    type_error(f, "an object", v);
  out.clear();
  for (const auto& [key, item] : v.get_object()) {
    decode(item, out[std::string(key)], Field{fmt::format("{}.{}", f.path, std::string_view(key))});
  }
}

void decode(const json::value& v, std::variant<std::string, std::vector<std::string>>& out,
            const Field& f) {
  if (v.is_string()) {
    out = std::string(v.get_string());
  } else if (v.is_array()) {
    decode(v, out.emplace<std::vector<std::string>>(), f);
  } else {
    type_error(f, "a string or an array of strings", v);
  }
}

// Rules beyond the field types: tags name the one variant rex implements, so another value is
// a request rex cannot serve rather than something to ignore.
template <class T>
void validate(const T& v, std::string_view path) {
  if constexpr (requires { v.session_type; }) {
    check_one_of(path, "session_type", v.session_type, {"bash"});
  }
  if constexpr (requires { v.action_type; }) {
    const T defaults{};
    check_one_of(path, "action_type", v.action_type, {defaults.action_type});
  }
  if constexpr (std::is_same_v<T, BashAction>) {
    check_one_of(path, "check", v.check, {"raise", "silent", "ignore"});
  }
}

template <Described T>
void decode(const json::value& v, T& out, const Field& f) {
  if (!v.is_object())
    type_error(f, "an object", v);
  const json::object& fields = v.get_object();
  // Unknown fields are never looked at; absent ones keep the member's default.
  boost::mp11::mp_for_each<boost::describe::describe_members<T, boost::describe::mod_public>>(
      [&](auto member) {
        const std::string_view name = json_name(member.name);
        const std::string path = fmt::format("{}.{}", f.path, name);
        if (const json::value* field = fields.if_contains(name)) {
          decode(*field, out.*member.pointer, Field{path});
        } else if (is_required(kTypeName<T>, name)) {
          throw ProtocolError(path + ": required field missing");
        }
      });
  validate(out, f.path);
}

// Encoders: every field is written, so clients of any version find what they expect.
json::value encode(const std::string& s) {
  return json::value(s);
}
json::value encode(bool b) {
  return json::value(b);
}
json::value encode(double d) {
  return json::value(d);
}
template <std::integral I>
json::value encode(I i) {
  return json::value(i);
}
template <class T>
json::value encode(const std::optional<T>& v);
template <class T>
json::value encode(const std::vector<T>& v);
template <class T>
json::value encode(const std::map<std::string, T>& v);
template <class... Ts>
json::value encode(const std::variant<Ts...>& v);
template <Described T>
json::value encode(const T& v);

template <class T>
json::value encode(const std::optional<T>& v) {
  return v ? encode(*v) : json::value(nullptr);
}

template <class T>
json::value encode(const std::vector<T>& v) {
  json::array out;
  out.reserve(v.size());
  for (const T& item : v)
    out.push_back(encode(item));
  return out;
}

template <class T>
json::value encode(const std::map<std::string, T>& v) {
  json::object out;
  for (const auto& [key, item] : v)
    out[key] = encode(item);
  return out;
}

template <class... Ts>
json::value encode(const std::variant<Ts...>& v) {
  return std::visit([](const auto& alternative) { return encode(alternative); }, v);
}

template <Described T>
json::value encode(const T& v) {
  json::object out;
  boost::mp11::mp_for_each<boost::describe::describe_members<T, boost::describe::mod_public>>(
      [&](auto member) { out[json_name(member.name)] = encode(v.*member.pointer); });
  return out;
}

template <class T>
T decode_root(const json::value& v) {
  T out{};
  decode(v, out, Field{std::string(kTypeName<T>)});
  return out;
}

Action decode_action(const json::value& v) {
  if (!v.is_object())
    type_error(Field{"Action"}, "an object", v);
  const json::value* tag = v.get_object().if_contains("action_type");
  if (tag == nullptr)
    return decode_root<BashAction>(v);  // SWE-ReX's default action type
  if (!tag->is_string())
    type_error(Field{"Action.action_type"}, "a string", *tag);
  if (tag->get_string() == "bash")
    return decode_root<BashAction>(v);
  if (tag->get_string() == "bash_interrupt")
    return decode_root<BashInterruptAction>(v);
  throw ProtocolError(fmt::format("Action.action_type: unknown action type {:?}",
                                  std::string_view(tag->get_string())));
}

}  // namespace

template <class T>
T from_json(const json::value& v) {
  if constexpr (std::is_same_v<T, Action>) {
    return decode_action(v);
  } else {
    return decode_root<T>(v);
  }
}

template <class T>
json::value to_json(const T& v) {
  return encode(v);
}

template <class T>
T parse_json(std::string_view text) {
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec);
  if (ec)
    throw ProtocolError("invalid JSON: " + ec.message());
  return from_json<T>(v);
}

#define REX_INSTANTIATE(T)                     \
  template T from_json<T>(const json::value&); \
  template json::value to_json<T>(const T&);   \
  template T parse_json<T>(std::string_view);
REX_PROTOCOL_TYPES(REX_INSTANTIATE)
REX_INSTANTIATE(Action)
#undef REX_INSTANTIATE

}  // namespace rex

#undef REX_PROTOCOL_TYPES
