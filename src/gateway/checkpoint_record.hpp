// CheckpointRecord: what the gateway knows of one checkpoint of a session's sandbox, as stored
// (Store's checkpoints table keeps its JSON form) and as the API shows it. Pure data, no I/O.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace rex::gateway {

namespace checkpoint_state {
inline constexpr std::string_view creating = "creating";  // recorded, its image not yet made
inline constexpr std::string_view ready = "ready";
}  // namespace checkpoint_state

struct CheckpointRecord {
  std::string id;  // "ckpt-" and 16 hex digits
  std::string tenant;
  std::string provider;  // holds its image
  std::string environment;
  std::string session;  // the session it was taken of
  std::string state{checkpoint_state::creating};
  std::string parent;  // the checkpoint that session last came from or took; empty: none
  // The checkpoint whose image the session's sandbox had started from when this was taken (its
  // image is a child of that one's): empty when it started from the environment's image.
  std::string base;
  std::string kind = "checkpoint";  // or "pause": made by a pause without memory
  std::string image;                // the provider's image
  std::string working_dir;          // the session's working directory when it was taken
  boost::json::array sessions;      // SessionState objects
  boost::json::array not_carried;   // SessionNotCarried objects
  boost::json::object metadata;
  double created_at = 0;

  boost::json::object to_json() const;
  /// The API's view.
  boost::json::object public_json() const;
  /// Throws std::invalid_argument naming the field when the stored form is damaged.
  static CheckpointRecord from_json(const boost::json::object& o);
};

}  // namespace rex::gateway
