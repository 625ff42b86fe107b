// JSON mapping of every protocol type (Boost.JSON).
//
// Decoding follows the protocol's rules: unknown fields are ignored, missing fields take their
// defaults, a field of the wrong type or a missing required field throws ProtocolError naming
// the field ("BashAction.timeout: expected a number or null, got string"). `null` is accepted
// for optional fields only. A trailing underscore in a C++ member name (stdout_) is dropped in
// its JSON name.
#pragma once

#include <rex/protocol/actions.hpp>
#include <rex/protocol/commands.hpp>
#include <rex/protocol/files.hpp>
#include <rex/protocol/processes.hpp>
#include <rex/protocol/responses.hpp>
#include <rex/protocol/session.hpp>

#include <boost/json/value.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

namespace rex {

/// A request or response body that does not fit its type (HTTP 422 on a server).
class ProtocolError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Decodes a protocol type. Defined for every type in rex/protocol/ and for Action (dispatched
/// on "action_type"; an unknown action type is a ProtocolError).
template <class T>
T from_json(const boost::json::value& v);

/// Encodes a protocol type. Every field is written, optional ones as null when empty.
template <class T>
boost::json::value to_json(const T& v);

/// Parses text, then decodes it; a syntax error is a ProtocolError too.
template <class T>
T parse_json(std::string_view text);

}  // namespace rex
