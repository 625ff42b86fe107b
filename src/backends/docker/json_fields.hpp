// Field access for Engine API request bodies being built: each returns the member, making it
// (replacing a value of another kind) when needed. Internal to the library.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <string_view>

namespace rex::detail {

inline boost::json::object& object_at(boost::json::object& o, std::string_view key) {
  boost::json::value& v = o[key];
  if (!v.is_object())
    v = boost::json::object();
  return v.as_object();
}

inline boost::json::array& array_at(boost::json::object& o, std::string_view key) {
  boost::json::value& v = o[key];
  if (!v.is_array())
    v = boost::json::array();
  return v.as_array();
}

/// The "HostConfig" member of a container-create body.
inline boost::json::object& host_config(boost::json::object& body) {
  return object_at(body, "HostConfig");
}

}  // namespace rex::detail
