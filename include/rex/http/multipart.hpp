// multipart/form-data (RFC 7578), the body of SWE-ReX's `/upload`: a streaming parser for the
// server and a body writer for the client.
//
// The parser is a pure state machine (no I/O, no clock): it takes the body in chunks of any
// size and reports parts as they begin, produce data and end. Its memory is bounded by the
// boundary length plus the per-part header limit, whatever the size of the body, so a server
// can stream an upload of any size to disk. Malformed input is a MultipartError saying what is
// wrong and in which part.
//
// Threading: a MultipartParser is used from one thread at a time; the free functions are
// thread-safe.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex::http {

/// The boundary parameter of a Content-Type such as `multipart/form-data; boundary="x"` (type
/// and parameter names case-insensitive, the value quoted or a token); nullopt when the type is
/// not multipart/form-data, the header is malformed, or the boundary is not 1 to 70 of RFC
/// 2046's boundary characters (letters, digits, space not last, and '()+_,-./:=?).
std::optional<std::string> multipart_boundary(std::string_view content_type);

/// What a part's headers say about it.
struct MultipartPartHeaders {
  std::string name;                     // Content-Disposition's name
  std::optional<std::string> filename;  // its filename (filename*= in UTF-8 or Latin-1 wins)
  std::string content_type;             // the Content-Type header, "text/plain" when absent
};

/// A body that is not valid multipart/form-data (or a parser used after it failed).
class MultipartError : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

/// Incremental push parser of a multipart/form-data body.
///
/// Feed the body as it arrives, in chunks of any size (down to 1 byte); the handlers are called
/// as parts begin, produce data (views valid only during the call, never empty) and end. A part
/// is never buffered whole: memory stays within buffered_bytes() <= boundary length + 4 +
/// max_header_bytes. The preamble before the first boundary and the epilogue after the closing
/// one are ignored. Malformed input (no boundary line, a boundary line followed by anything but
/// CRLF or "--", bad or oversized headers, no Content-Disposition name, a body that ends before
/// the closing boundary) throws MultipartError. After any exception, including one thrown by a
/// handler, the parser is failed: feed() and finish() throw again.
class MultipartParser {
 public:
  struct Handlers {
    std::function<void(const MultipartPartHeaders&)> on_part_begin;
    std::function<void(std::string_view)> on_part_data;
    std::function<void()> on_part_end;
  };

  /// `boundary` as multipart_boundary returns it (1 to 70 bytes, no CR or LF, else
  /// MultipartError). `max_header_bytes` bounds each part's header block, blank line included.
  MultipartParser(std::string boundary, Handlers handlers,
                  std::size_t max_header_bytes = 16 * 1024);

  void feed(std::string_view bytes);

  /// Call at the end of the body: throws MultipartError unless the closing boundary was seen.
  void finish();

  /// True once the closing boundary has been seen.
  bool done() const noexcept;

  /// Bytes held inside the parser between calls: a possible boundary split across chunks, or
  /// the headers of the current part. Bounded as above.
  std::size_t buffered_bytes() const noexcept;

 private:
  enum class State {
    preamble,
    after_delimiter,
    second_dash,
    padding,
    expect_lf,
    headers,
    body,
    done,
    failed
  };

  void feed_bytes(std::string_view bytes);
  std::size_t scan_for_delimiter(std::string_view in);
  void emit(std::string_view data);
  void on_delimiter();
  void after_delimiter(char c);
  std::size_t consume_headers(std::string_view in);
  void begin_part(std::string_view block);
  [[noreturn]] void fail(const std::string& what) const;

  std::string delimiter_;  // "\r\n--" + boundary
  Handlers handlers_;
  std::size_t max_header_bytes_;
  State state_ = State::preamble;
  std::string match_;        // held-back bytes that may begin a delimiter (a prefix of it)
  std::size_t virtual_ = 0;  // leading bytes of match_ that stand for a CRLF not in the input
  std::string headers_;      // the current part's header block so far
  std::size_t part_count_ = 0;
};

/// A text field of a body written by write_multipart_body.
struct MultipartField {
  std::string name;
  std::string value;
};

/// The file part of a body written by write_multipart_body.
struct MultipartFile {
  std::string name;            // the form field, e.g. "file"
  std::string filename;        // sent as Content-Disposition's filename
  std::filesystem::path path;  // where the content is read from
  std::string content_type = "application/octet-stream";
};

/// Client side: writes a complete multipart/form-data body to `body_path` (replaced whole, never
/// left half-written): first the text fields, then the file part, whose content is streamed
/// from `file.path` (never read whole into memory). Returns the Content-Type header value,
/// `multipart/form-data; boundary=...`, with a long random boundary checked not to occur in
/// anything written. Names and file names are quoted with backslash escapes; one holding CR,
/// LF or NUL (which no header can carry) is a ValueError naming it, as is such a content type.
/// File errors are throw_os_error's exceptions (FileNotFoundError, ...).
std::string write_multipart_body(const std::filesystem::path& body_path,
                                 const std::vector<MultipartField>& fields,
                                 const MultipartFile& file);

}  // namespace rex::http
