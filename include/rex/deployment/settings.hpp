// The settings codec: a backend's settings struct from and to JSON, strictly, driven by the
// struct's description (BOOST_DESCRIBE_STRUCT) and a short list of rules for the fields that need
// more than their type says (a name on the wire, a range, a fixed set of values).
//
// Decoding refuses an unknown field, a value of the wrong type and one out of range, naming
// "type.field": `docker.pull: expected one of never, missing, always, got "sometimes"`. A field
// absent keeps the struct's default. Encoding writes every described field, optional ones as
// null, so the result decodes back to the same settings.
//
// What each C++ type accepts: std::string (a string), bool, double (a number, at least the
// rule's min), int and std::optional<std::int64_t> (an integer in the rule's range; null keeps
// the default), std::optional<double> and std::optional<std::string> (or null), a vector of
// strings, a map of strings (numbers and booleans written as their JSON text), boost::json's
// object and array (any), and an enum described with BOOST_DESCRIBE_ENUM (one of its names).
//
// Threading: pure functions; call them from anywhere.
#pragma once

#include <boost/describe/enum_from_string.hpp>
#include <boost/describe/enum_to_string.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/describe/members.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/mp11/algorithm.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace rex {

/// A config that cannot be used. The message names the field and what is wrong with it:
/// "docker.pull: expected one of never, missing, always, got \"sometimes\"".
class DeploymentConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
  /// An error the settings codec found at one field: `message` says it all, `field` (its wire
  /// name) and `problem` ("must not be empty") let a reader of another format point at it.
  DeploymentConfigError(const std::string& message, std::string field, std::string problem)
      : std::invalid_argument(message), field_(std::move(field)), problem_(std::move(problem)) {}

  /// The field at fault and what is wrong with it; empty when the error is not one field's.
  const std::string& field() const noexcept { return field_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string field_;
  std::string problem_;
};

/// A duration of a settings struct: seconds, fractions allowed, as a number on the wire.
using Seconds = std::chrono::duration<double>;

namespace settings {

namespace json = boost::json;

/// What one field accepts beyond its type, by the C++ member's name.
struct Rule {
  std::string_view member;
  std::string_view name = {};  // its name on the wire when not the member's
  double min = 0;              // numbers and integers
  double max = std::numeric_limits<double>::infinity();
  std::string_view choices = {};  // strings: the values allowed, "auto|port|container_ip"
  bool null_clears = false;       // strings: null means empty (SWE-ReX's None)
  std::string_view alias = {};    // another name accepted on the wire (the gateway's "cluster")
};

/// The JSON name of a C++ member: its rule's name, else the member's without a trailing '_'.
std::string_view wire_name(std::string_view member, std::span<const Rule> rules) noexcept;
const Rule* rule_of(std::string_view member, std::span<const Rule> rules) noexcept;

/// Reads the fields of one settings object and refuses what it did not read (finish()).
class Reader {
 public:
  /// What the settings are for: a whole deployment, or the defaults of the sandboxes a holder
  /// (a gateway's provider) starts, each request giving the rest (the image, say).
  enum class Use { deployment, defaults };

  Reader(const json::object& object, std::string_view type, Use use = Use::deployment)
      : object_(object), type_(type), use_(use) {}

  /// Defaults only: the fields each sandbox names itself may be absent.
  bool defaults() const noexcept { return use_ == Use::defaults; }
  bool has(std::string_view key) const noexcept { return object_.contains(key); }

  void string(std::string_view key, std::string& out, const Rule* rule = nullptr);
  void optional_string(std::string_view key, std::optional<std::string>& out);
  void boolean(std::string_view key, bool& out);
  void number(std::string_view key, double& out, double min = 0);
  void optional_number(std::string_view key, std::optional<double>& out, double min = 0);
  void integer(std::string_view key, std::optional<std::int64_t>& out, double min, double max);
  void strings(std::string_view key, std::vector<std::string>& out);
  void string_map(std::string_view key, std::map<std::string, std::string>& out);
  void object(std::string_view key, json::object& out);
  void array(std::string_view key, json::array& out);
  /// One of `names` (a string); its index.
  std::optional<std::size_t> choice(std::string_view key, std::span<const std::string_view> names);
  /// The value, marked as read, for a field the codec has no type for.
  const json::value* raw(std::string_view key) { return take(key); }

  /// Unknown fields are errors, as in SWE-ReX's configs ("type" is the caller's).
  void finish() const;

  /// A duration field's check: fails unless `seconds` is above zero.
  void positive_seconds(std::string_view key, Seconds seconds) const;

  [[noreturn]] void fail(std::string_view key, std::string message) const;
  [[noreturn]] void wrong(std::string_view key, std::string_view expected,
                          const json::value& got) const;
  std::string_view type() const noexcept { return type_; }

 private:
  const json::value* take(std::string_view key);

  const json::object& object_;
  std::string type_;
  Use use_;
  std::set<std::string, std::less<>> read_;
};

namespace detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class E>
std::vector<std::string_view> enum_names() {
  std::vector<std::string_view> names;
  boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>(
      [&](auto d) { names.emplace_back(d.name); });
  return names;
}

template <class F>
void read_field(Reader& r, std::string_view key, F& out, const Rule* rule) {
  const double min = rule ? rule->min : 0;
  const double max = rule ? rule->max : std::numeric_limits<double>::infinity();
  if constexpr (std::is_same_v<F, std::string>) {
    r.string(key, out, rule);
  } else if constexpr (std::is_same_v<F, bool>) {
    r.boolean(key, out);
  } else if constexpr (std::is_same_v<F, double>) {
    r.number(key, out, min);
  } else if constexpr (std::is_same_v<F, Seconds>) {
    double seconds = out.count();
    r.number(key, seconds, min);
    out = Seconds(seconds);
  } else if constexpr (std::is_same_v<F, int>) {
    std::optional<std::int64_t> i;
    r.integer(key, i, min, max);
    if (i)
      out = static_cast<int>(*i);
  } else if constexpr (std::is_same_v<F, std::optional<int>> ||
                       std::is_same_v<F, std::optional<std::int64_t>>) {
    // Absent keeps the value, null clears it.
    std::optional<std::int64_t> i;
    if (out)
      i = *out;
    r.integer(key, i, min, max);
    out = i ? F(static_cast<typename F::value_type>(*i)) : F();
  } else if constexpr (std::is_same_v<F, std::optional<double>>) {
    r.optional_number(key, out, min);
  } else if constexpr (std::is_same_v<F, std::optional<std::string>>) {
    r.optional_string(key, out);
  } else if constexpr (std::is_same_v<F, std::vector<std::string>>) {
    r.strings(key, out);
  } else if constexpr (std::is_same_v<F, std::map<std::string, std::string>>) {
    r.string_map(key, out);
  } else if constexpr (std::is_same_v<F, json::object>) {
    r.object(key, out);
  } else if constexpr (std::is_same_v<F, json::array>) {
    r.array(key, out);
  } else if constexpr (std::is_enum_v<F>) {
    static const std::vector<std::string_view> names = enum_names<F>();
    if (auto i = r.choice(key, names))
      boost::describe::enum_from_string(names[*i].data(), out);
  } else {
    static_assert(sizeof(F) == 0, "a settings field of a type the codec does not know");
  }
}

template <class F>
json::value write_field(const F& v) {
  if constexpr (is_optional<F>::value) {
    return v ? write_field(*v) : json::value(nullptr);
  } else if constexpr (std::is_same_v<F, std::vector<std::string>>) {
    json::array a;
    for (const auto& s : v)
      a.emplace_back(s);
    return a;
  } else if constexpr (std::is_same_v<F, std::map<std::string, std::string>>) {
    json::object o;
    for (const auto& [k, s] : v)
      o[k] = s;
    return o;
  } else if constexpr (std::is_enum_v<F>) {
    return json::value(boost::describe::enum_to_string(v, ""));
  } else if constexpr (std::is_same_v<F, Seconds>) {
    return json::value(v.count());
  } else {
    return json::value(v);
  }
}

}  // namespace detail

/// Reads every described member of T that `r`'s object holds. Members without a description
/// (a field only the program sets) are left alone; the caller reads anything else it accepts
/// and then calls r.finish().
template <class T>
void read(Reader& r, T& out, std::span<const Rule> rules = {}) {
  using Members = boost::describe::describe_members<T, boost::describe::mod_public>;
  boost::mp11::mp_for_each<Members>([&](auto d) {
    const Rule* rule = rule_of(d.name, rules);
    std::string_view key = wire_name(d.name, rules);
    if (rule != nullptr && !rule->alias.empty() && !r.has(key) && r.has(rule->alias))
      key = rule->alias;
    detail::read_field(r, key, out.*d.pointer, rule);
  });
}

/// Every described member of T, under its wire name.
template <class T>
json::object write(const T& in, std::span<const Rule> rules = {}) {
  json::object o;
  using Members = boost::describe::describe_members<T, boost::describe::mod_public>;
  boost::mp11::mp_for_each<Members>(
      [&](auto d) { o[wire_name(d.name, rules)] = detail::write_field(in.*d.pointer); });
  return o;
}

}  // namespace settings
}  // namespace rex
