// Reading an API object's fields by path, as the API's optional fields want: a missing field, or
// one of another type, reads as empty rather than throwing.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

namespace rex {

/// The string at `path` in `object` ({"metadata", "name"}), or empty when some step is missing or
/// not an object, or the field is not a string.
inline std::string field_text(const boost::json::object& object,
                              std::initializer_list<std::string_view> path) {
  const boost::json::object* in = &object;
  const boost::json::value* at = nullptr;
  for (const auto key : path) {
    if (in == nullptr || (at = in->if_contains(key)) == nullptr)
      return {};
    in = at->if_object();
  }
  return at != nullptr && at->is_string() ? std::string(at->get_string()) : std::string();
}

inline std::string field_text(const boost::json::value& object,
                              std::initializer_list<std::string_view> path) {
  const boost::json::object* o = object.if_object();
  return o != nullptr ? field_text(*o, path) : std::string();
}

}  // namespace rex
