// The settings codec's reader: one method per kind of value, each error naming "type.field".
#include <rex/deployment/settings.hpp>

#include <fmt/format.h>
#include <boost/json/serialize.hpp>

#include <cmath>

#include "core/json_kind.hpp"

namespace rex::settings {

std::string_view wire_name(std::string_view member, std::span<const Rule> rules) noexcept {
  if (const Rule* rule = rule_of(member, rules); rule && !rule->name.empty())
    return rule->name;
  if (!member.empty() && member.back() == '_')
    member.remove_suffix(1);
  return member;
}

const Rule* rule_of(std::string_view member, std::span<const Rule> rules) noexcept {
  for (const Rule& rule : rules) {
    if (rule.member == member)
      return &rule;
  }
  return nullptr;
}

void Reader::string(std::string_view key, std::string& out, const Rule* rule) {
  const json::value* v = take(key);
  if (v == nullptr)
    return;
  if (rule != nullptr && !rule->choices.empty()) {
    std::vector<std::string_view> names;
    for (std::string_view rest = rule->choices; !rest.empty();) {
      const auto bar = rest.find('|');
      names.push_back(rest.substr(0, bar));
      rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
    }
    if (auto i = choice(key, names))
      out = std::string(names[*i]);
    return;
  }
  if (v->is_null() && rule != nullptr && rule->null_clears) {
    out.clear();
    return;
  }
  if (!v->is_string())
    wrong(key, rule != nullptr && rule->null_clears ? "a string or null" : "a string", *v);
  out = std::string(v->as_string());
}

void Reader::optional_string(std::string_view key, std::optional<std::string>& out) {
  if (const json::value* v = take(key)) {
    if (v->is_null())
      out.reset();
    else if (v->is_string())
      out = std::string(v->as_string());
    else
      wrong(key, "a string or null", *v);
  }
}

void Reader::boolean(std::string_view key, bool& out) {
  if (const json::value* v = take(key)) {
    if (!v->is_bool())
      wrong(key, "true or false", *v);
    out = v->as_bool();
  }
}

void Reader::number(std::string_view key, double& out, double min) {
  if (const json::value* v = take(key)) {
    if (!v->is_number())
      wrong(key, "a number", *v);
    out = v->to_number<double>();
    if (!std::isfinite(out) || out < min)
      fail(key, fmt::format("{} must be a number of at least {}", out, min));
  }
}

void Reader::optional_number(std::string_view key, std::optional<double>& out, double min) {
  if (const json::value* v = take(key)) {
    if (v->is_null()) {
      out.reset();
      return;
    }
    if (!v->is_number())
      wrong(key, "a number or null", *v);
    const double d = v->to_number<double>();
    if (!std::isfinite(d) || d < min)
      fail(key, fmt::format("{} must be at least {}", d, min));
    out = d;
  }
}

void Reader::integer(std::string_view key, std::optional<std::int64_t>& out, double min,
                     double max) {
  const json::value* v = take(key);
  if (v == nullptr)
    return;
  if (v->is_null()) {
    out.reset();
    return;
  }
  std::int64_t i = 0;
  if (v->is_int64())
    i = v->as_int64();
  else if (v->is_uint64() && v->as_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    i = static_cast<std::int64_t>(v->as_uint64());
  else if (v->is_double() && std::trunc(v->as_double()) == v->as_double() &&
           std::fabs(v->as_double()) < 9e15)
    i = static_cast<std::int64_t>(v->as_double());
  else
    wrong(key, "an integer or null", *v);
  const auto bound = [](double b) {
    return b >= 9.2e18 ? INT64_MAX : b <= -9.2e18 ? INT64_MIN : static_cast<std::int64_t>(b);
  };
  if (static_cast<double>(i) < min || static_cast<double>(i) > max)
    fail(key, fmt::format("{} is out of range ({}..{})", i, bound(min), bound(max)));
  out = i;
}

void Reader::strings(std::string_view key, std::vector<std::string>& out) {
  if (const json::value* v = take(key)) {
    if (!v->is_array())
      wrong(key, "an array of strings", *v);
    out.clear();
    for (const auto& item : v->as_array()) {
      if (!item.is_string())
        wrong(key, "an array of strings", item);
      out.emplace_back(item.as_string());
    }
  }
}

void Reader::string_map(std::string_view key, std::map<std::string, std::string>& out) {
  if (const json::value* v = take(key)) {
    if (!v->is_object())
      wrong(key, "an object of strings", *v);
    out.clear();
    for (const auto& [k, item] : v->as_object()) {
      if (item.is_string())
        out[std::string(k)] = std::string(item.as_string());
      else if (item.is_number() || item.is_bool())
        out[std::string(k)] = json::serialize(item);  // {"N": 1} means "1", as YAML users write
      else
        fail(key, fmt::format("value of \"{}\": expected a string, got {}", std::string(k),
                              rex::detail::json_kind_phrase(item)));
    }
  }
}

void Reader::object(std::string_view key, json::object& out) {
  if (const json::value* v = take(key)) {
    if (!v->is_object())
      wrong(key, "an object", *v);
    out = v->as_object();
  }
}

void Reader::array(std::string_view key, json::array& out) {
  if (const json::value* v = take(key)) {
    if (!v->is_array())
      wrong(key, "an array", *v);
    out = v->as_array();
  }
}

std::optional<std::size_t> Reader::choice(std::string_view key,
                                          std::span<const std::string_view> names) {
  const json::value* v = take(key);
  if (v == nullptr)
    return std::nullopt;
  if (v->is_string()) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (v->as_string() == names[i])
        return i;
    }
  }
  std::string list;
  for (const auto name : names)
    list += (list.empty() ? "" : ", ") + std::string(name);
  fail(key, fmt::format("expected one of {}, got {}", list, json::serialize(*v)));
}

void Reader::finish() const {
  for (const auto& [k, v] : object_) {
    if (k != "type" && !read_.contains(std::string_view(k)))
      throw DeploymentConfigError(fmt::format("{}: unknown field \"{}\"", type_, std::string(k)),
                                  std::string(k), "unknown field");
  }
}

void Reader::positive_seconds(std::string_view key, Seconds seconds) const {
  if (!(seconds.count() > 0))
    fail(key, "must be a positive number of seconds");
}

void Reader::fail(std::string_view key, std::string message) const {
  std::string text = fmt::format("{}.{}: {}", type_, key, message);
  throw DeploymentConfigError(text, std::string(key), std::move(message));
}

void Reader::wrong(std::string_view key, std::string_view expected, const json::value& got) const {
  fail(key, fmt::format("expected {}, got {}", expected, rex::detail::json_kind_phrase(got)));
}

const json::value* Reader::take(std::string_view key) {
  read_.emplace(key);
  return object_.if_contains(key);
}

}  // namespace rex::settings
