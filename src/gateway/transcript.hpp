// A session's transcript (logs/<id>.jsonl): one JSON line per call, appended with one write so
// that the lines of concurrent calls never interleave, each ending with the time, the request's
// id and the actor. Request and answer bodies go in as JSON when they are JSON and small enough,
// else as their text, clipped.
#pragma once

#include <boost/json/value.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/unique_fd.hpp"

namespace rex::gateway {

constexpr std::size_t kLogBodyLimit = 64 * 1024;  // of each request and answer in a transcript

/// `text` as it is when short enough, else its first kLogBodyLimit bytes and its size.
std::string clip(std::string_view text);
/// A body in a transcript: its JSON when it is JSON and small enough, else its text, clipped.
boost::json::value body_for_log(std::string_view body);
/// Whether `text` is JSON (as boost::json::parse reads it) with no line break in it.
bool one_line_json(std::string_view text);

/// A body kept for a transcript line written later: the body when small enough to be parsed
/// then, else only its clipped text.
class LoggedBody {
 public:
  explicit LoggedBody(std::string_view body)
      : whole_(body.size() <= kLogBodyLimit), text_(whole_ ? std::string(body) : clip(body)) {}

  boost::json::value json() const;
  /// Appends the body to a line's text as json() gives it; a body that is JSON on one line is
  /// appended as it came, checked but not made into values and written out again.
  void append_to(std::string& line) const;

 private:
  bool whole_;
  std::string text_;
};

/// Ends a line whose text is a JSON object's without its closing brace ("{" and its members):
/// adds the seconds the call took since its request arrived at `since` (none when `since` is
/// 0), the time (ISO 8601), the request's id and the actor, the brace and the newline.
void end_line(std::string& text, double unix_seconds, std::string_view request_id,
              std::string_view actor, double since = 0);

/// Appends a whole line to the transcript at `path` with one write; `file` is the transcript
/// held open (opened here, O_APPEND, when it is not). False (logged) when it cannot be opened.
bool append_line(rex::detail::UniqueFd& file, const std::filesystem::path& path,
                 std::string_view line);

}  // namespace rex::gateway
