// Server-Sent Events (the WHATWG "text/event-stream" format): an encoder that turns one event
// into its bytes, and an incremental parser that turns bytes, cut anywhere, into whole events.
//
// Guarantees: what encode_sse_event writes, SseParser reads back as the same event (name and
// data, newlines in the data included). The parser follows the standard's reading: lines end
// with CRLF, LF or CR (a CRLF split across two pieces is one line end); a line starting with
// ':' is a comment; one space after the colon is dropped; several data lines join with '\n';
// a blank line ends the event, and an event without data lines is not delivered. An event
// still open when the stream ends is dropped, as a browser drops it.
// Threading: SseParser is a plain value; use one from one thread at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rex::http {

/// One event: its name ("message" when the stream gave none), its data and its last event id.
struct SseEvent {
  std::string event = "message";
  std::string data;
  std::string id;

  bool operator==(const SseEvent&) const = default;
};

/// The bytes of one event: "id: <id>\n" when an id is given, "event: <name>\n", one
/// "data: <line>\n" per line of `data` (split at LF, CRLF or CR), then the blank line that ends
/// it. `name` and `id` must hold no line break.
std::string encode_sse_event(std::string_view name, std::string_view data,
                             std::string_view id = {});

/// Reads a Server-Sent Events stream piece by piece.
class SseParser {
 public:
  /// Feeds the next bytes of the stream; appends each event they complete to `out`.
  void feed(std::string_view piece, std::vector<SseEvent>& out);

 private:
  void line(std::string_view text, std::vector<SseEvent>& out);

  std::string partial_;     // an unfinished line
  bool skip_lf_ = false;    // the last piece ended with CR: a leading LF ends no new line
  SseEvent current_;        // fields of the event being read
  bool have_data_ = false;  // `current_` has at least one data line
  std::string last_id_;     // the id field persists from event to event
};

}  // namespace rex::http
