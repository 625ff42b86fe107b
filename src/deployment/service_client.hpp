// What the deployments that reach a service over HTTP (gateway, e2b) share. Internal to the
// library.
#pragma once

#include <rex/deployment/config.hpp>
#include <rex/http/url.hpp>

#include "core/clock.hpp"

#include <fmt/format.h>
#include <boost/json/object.hpp>

#include <map>
#include <string>
#include <string_view>

namespace rex::detail {

/// `url` without trailing slashes; DeploymentConfigError naming `field` when it is not a URL.
inline std::string checked_base_url(std::string url, std::string_view field) {
  while (url.ends_with('/'))
    url.pop_back();
  try {
    (void)http::parse_url(url);
  } catch (const http::InvalidUrlError& e) {
    throw DeploymentConfigError(fmt::format("{}: {}", field, e.what()));
  }
  return url;
}

inline boost::json::object json_string_map(const std::map<std::string, std::string>& m) {
  boost::json::object o;
  for (const auto& [k, v] : m)
    o[k] = v;
  return o;
}

}  // namespace rex::detail
