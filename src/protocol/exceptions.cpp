// Exception transfer over HTTP 511 (PROTOCOL.md): the wire form, and back to the C++ type.
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

namespace rex {
namespace {

namespace json = boost::json;

using Thrower = void (*)(const std::string& message, json::object extra_info);

template <class E>
[[noreturn]] void throw_as(const std::string& message, json::object extra_info) {
  throw E(message, std::move(extra_info));
}

// Keyed by each type's own class_path(), so the table cannot disagree with the hierarchy.
template <class... E>
std::map<std::string, Thrower, std::less<>> make_throwers() {
  std::map<std::string, Thrower, std::less<>> table;
  (table.emplace(E("").class_path(), &throw_as<E>), ...);
  return table;
}

const std::map<std::string, Thrower, std::less<>>& throwers_by_class_path() {
  static const auto table =
      make_throwers<SwerexException, CommandTimeoutError, NonZeroExitCodeError,
                    BashIncorrectSyntaxError, SessionExistsError, SessionDoesNotExistError,
                    SessionNotInitializedError, NoExitCodeError, PexpectTimeout, FileNotFoundError,
                    IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError,
                    ValueError, LookupError, OSError>();
  return table;
}

// rex-only types travel under SwerexException's class path (stock clients know no other);
// extra_info["rex_error"] names the precise type for rex's own client.
template <class E>
bool is_a(const SwerexException& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

struct RexOnlyType {
  std::string_view name;
  bool (*matches)(const SwerexException&);
  Thrower raise;
};

constexpr std::array<RexOnlyType, 5> kRexOnlyTypes{{
    {"SessionDiedError", &is_a<SessionDiedError>, &throw_as<SessionDiedError>},
    {"SessionBusyError", &is_a<SessionBusyError>, &throw_as<SessionBusyError>},
    {"NoCommandRunningError", &is_a<NoCommandRunningError>, &throw_as<NoCommandRunningError>},
    {"ProcessDoesNotExistError", &is_a<ProcessDoesNotExistError>,
     &throw_as<ProcessDoesNotExistError>},
    {"ProcessesUnsupportedError", &is_a<ProcessesUnsupportedError>,
     &throw_as<ProcessesUnsupportedError>},
}};

constexpr std::string_view kRexErrorKey = "rex_error";

// A wire object we cannot read still becomes an exception, keeping the object for diagnosis.
[[noreturn]] void throw_malformed(const json::object& wire, std::string_view problem) {
  throw SwerexException(fmt::format("malformed exception transfer: {}", problem),
                        json::object{{"wire", wire}});
}

}  // namespace

json::object to_wire(const SwerexException& e) {
  json::object extra_info = e.extra_info();
  for (const RexOnlyType& type : kRexOnlyTypes) {
    if (type.matches(e))
      extra_info[kRexErrorKey] = type.name;
  }
  return json::object{{"message", e.message()},
                      {"class_path", e.class_path()},
                      {"traceback", ""},
                      {"extra_info", std::move(extra_info)}};
}

[[noreturn]] void throw_wire(const json::object& wire) {
  const json::value* message = wire.if_contains("message");
  const json::value* class_path = wire.if_contains("class_path");
  const json::value* extra = wire.if_contains("extra_info");
  if (message == nullptr || !message->is_string()) {
    throw_malformed(wire, "\"message\" is missing or not a string");
  }
  if (class_path == nullptr || !class_path->is_string()) {
    throw_malformed(wire, "\"class_path\" is missing or not a string");
  }
  if (extra != nullptr && !extra->is_object() && !extra->is_null()) {
    throw_malformed(wire, "\"extra_info\" is not an object");
  }
  const std::string text(message->get_string());
  const std::string_view path = class_path->get_string();
  json::object extra_info =
      extra != nullptr && extra->is_object() ? extra->get_object() : json::object{};

  // A tag naming a rex-only type was added by to_wire and is never part of the exception. It
  // only counts under the base class path; elsewhere it is dropped all the same, or the
  // exception would turn into that type when it is sent on (a server relaying a remote one).
  const json::value* rex_error = extra_info.if_contains(kRexErrorKey);
  if (rex_error != nullptr && rex_error->is_string()) {
    for (const RexOnlyType& type : kRexOnlyTypes) {
      if (rex_error->get_string() != type.name)
        continue;
      extra_info.erase(kRexErrorKey);
      if (path == SwerexException("").class_path())
        type.raise(text, std::move(extra_info));
      break;
    }
  }
  const auto& throwers = throwers_by_class_path();
  if (const auto it = throwers.find(path); it != throwers.end())
    it->second(text, std::move(extra_info));
  extra_info["class_path"] = path;
  throw SwerexException(text, std::move(extra_info));
}

namespace {

[[noreturn]] void throw_os_error_impl(int err, std::optional<std::string_view> filename) {
  const char* description = ::strerrordesc_np(err);
  const std::string strerror =
      description != nullptr ? description : fmt::format("Unknown error {}", err);
  std::string message = fmt::format("[Errno {}] {}", err, strerror);
  boost::json::object info{{"errno", err}, {"strerror", strerror}};
  if (filename) {
    message += ": " + python_repr(*filename);
    info["filename"] = utf8_backslashreplace(*filename);
  }
  switch (err) {
    case ENOENT:
      throw FileNotFoundError(message, std::move(info));
    case EISDIR:
      throw IsADirectoryError(message, std::move(info));
    case ENOTDIR:
      throw NotADirectoryError(message, std::move(info));
    case EEXIST:
      throw FileExistsError(message, std::move(info));
    case EACCES:
    case EPERM:
      throw PermissionError(message, std::move(info));
    default:
      throw OSError(message, std::move(info));
  }
}

}  // namespace

void throw_os_error(int err) {
  throw_os_error_impl(err, std::nullopt);
}

void throw_os_error(int err, std::string_view filename) {
  throw_os_error_impl(err, filename);
}

}  // namespace rex
