// How a configuration or instances-file error names the kind of a JSON value it did not
// expect ("expected a string, got a number"). Internal to the library.
#pragma once

#include <boost/json/value.hpp>

#include <string_view>

namespace rex::detail {

inline std::string_view json_kind_phrase(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null:
      return "null";
    case boost::json::kind::bool_:
      return "a boolean";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_:
      return "a number";
    case boost::json::kind::string:
      return "a string";
    case boost::json::kind::array:
      return "an array";
    case boost::json::kind::object:
      return "an object";
  }
  return "a value";
}

}  // namespace rex::detail
