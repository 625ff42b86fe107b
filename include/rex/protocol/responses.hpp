// Runtime-level responses that belong to no other group (PROTOCOL.md).
#pragma once

#include <boost/describe/class.hpp>

#include <string>

namespace rex {

struct IsAliveResponse {
  bool is_alive = true;
  std::string message{};
};
BOOST_DESCRIBE_STRUCT(IsAliveResponse, (), (is_alive, message))

struct CloseResponse {};
BOOST_DESCRIBE_STRUCT(CloseResponse, (), ())

}  // namespace rex
