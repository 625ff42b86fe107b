#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>

#include "core/file_system.hpp"
#include "core/hex.hpp"
#include "core/unique_fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

namespace rex::http {
namespace {

constexpr std::size_t kMaxBoundary = 70;  // RFC 2046

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// RFC 9110 token characters.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back()))
    s.remove_suffix(1);
  return s;
}

// RFC 2046 bchars.
bool is_bchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return std::strchr("'()+_,-./:=? ", c) != nullptr && c != '\0';
}

bool valid_boundary(std::string_view b) {
  return !b.empty() && b.size() <= kMaxBoundary && b.back() != ' ' &&
         std::all_of(b.begin(), b.end(), is_bchar);
}

// A header value of the form `value *( ";" name "=" ( token / quoted-string ) )`, as
// Content-Type and Content-Disposition use. Parameter names come out in lower case.
struct HeaderValue {
  std::string value;
  std::vector<std::pair<std::string, std::string>> params;
};

// Parses `text`; on malformed input returns nullopt and says why in `error`.
std::optional<HeaderValue> parse_header_value(std::string_view text, std::string& error) {
  HeaderValue out;
  std::size_t i = 0;
  const auto skip_ows = [&] {
    while (i < text.size() && is_ows(text[i]))
      ++i;
  };
  skip_ows();
  const std::size_t value_start = i;
  while (i < text.size() && text[i] != ';')
    ++i;
  out.value = std::string(trim_ows(text.substr(value_start, i - value_start)));
  while (i < text.size()) {
    ++i;  // the ';'
    skip_ows();
    if (i == text.size())
      break;  // a trailing ';'
    const std::size_t name_start = i;
    while (i < text.size() && is_tchar(text[i]))
      ++i;
    std::string name = to_lower(text.substr(name_start, i - name_start));
    if (name.empty()) {
      error = fmt::format("a parameter has no name at {}", python_repr(text.substr(name_start)));
      return std::nullopt;
    }
    skip_ows();
    if (i == text.size() || text[i] != '=') {
      error = fmt::format("parameter {} has no value", python_repr(name));
      return std::nullopt;
    }
    ++i;
    skip_ows();
    std::string value;
    if (i < text.size() && text[i] == '"') {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        const char c = text[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i == text.size())
            break;
          value += text[i++];
        } else {
          value += c;
        }
      }
      if (!closed) {
        error = fmt::format("the quoted value of parameter {} is not closed", python_repr(name));
        return std::nullopt;
      }
      skip_ows();
      if (i < text.size() && text[i] != ';') {
        error = fmt::format("unexpected {} after the quoted value of parameter {}",
                            python_repr(text.substr(i, 1)), python_repr(name));
        return std::nullopt;
      }
    } else {
      // A token, read leniently up to the next ';' (some senders leave file names unquoted).
      const std::size_t start = i;
      while (i < text.size() && text[i] != ';')
        ++i;
      value = std::string(trim_ows(text.substr(start, i - start)));
      if (value.empty()) {
        error = fmt::format("parameter {} has an empty value", python_repr(name));
        return std::nullopt;
      }
    }
    for (const auto& [existing, ignored] : out.params) {
      if (existing == name) {
        error = fmt::format("parameter {} is given twice", python_repr(name));
        return std::nullopt;
      }
    }
    out.params.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

const std::string* find_param(const HeaderValue& header, std::string_view name) {
  for (const auto& [key, value] : header.params) {
    if (key == name)
      return &value;
  }
  return nullptr;
}

// RFC 8187 ext-value (`charset'language'percent-encoded`) as UTF-8; nullopt for a charset
// other than UTF-8 and Latin-1 (then the plain filename stands). Malformed text throws.
std::optional<std::string> decode_ext_value(std::string_view text, std::size_t part) {
  const auto first = text.find('\'');
  const auto second = first == std::string_view::npos ? first : text.find('\'', first + 1);
  if (second == std::string_view::npos) {
    throw MultipartError(fmt::format(
        "malformed multipart body: filename* of part {} is not charset'language'value: {}", part,
        python_repr(text)));
  }
  const std::string charset = to_lower(text.substr(0, first));
  const bool utf8 = charset == "utf-8" || charset == "utf8";
  const bool latin1 = charset == "iso-8859-1" || charset == "latin-1" || charset == "latin1";
  if (!utf8 && !latin1)
    return std::nullopt;
  std::string bytes;
  const std::string_view encoded = text.substr(second + 1);
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] != '%') {
      bytes += encoded[i];
      continue;
    }
    const int hi = i + 2 < encoded.size() ? rex::detail::hex_value(encoded[i + 1]) : -1;
    const int lo = i + 2 < encoded.size() ? rex::detail::hex_value(encoded[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      throw MultipartError(
          fmt::format("malformed multipart body: filename* of part {} has a bad escape: {}", part,
                      python_repr(text)));
    }
    bytes += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  if (utf8)
    return bytes;
  std::string out;  // Latin-1 -> UTF-8
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80) {
      out += c;
    } else {
      out += static_cast<char>(0xC0 | (b >> 6));
      out += static_cast<char>(0x80 | (b & 0x3F));
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  std::string error;
  const auto header = parse_header_value(content_type, error);
  if (!header || !iequals(header->value, "multipart/form-data"))
    return std::nullopt;
  const std::string* boundary = find_param(*header, "boundary");
  if (boundary == nullptr || !valid_boundary(*boundary))
    return std::nullopt;
  return *boundary;
}

// ---------------------------------------------------------------------------------------------
// The parser.
//
// The delimiter is CRLF "--" boundary. The CRLF belongs to the delimiter, not to the data
// before it. A body may open with "--" boundary at once, and a part without a body may put its
// delimiter right after the blank line ending its headers: both are matched as if a CRLF came
// first ("virtual" bytes of match_, which are never data).

MultipartParser::MultipartParser(std::string boundary, Handlers handlers,
                                 std::size_t max_header_bytes)
    : delimiter_("\r\n--" + boundary),
      handlers_(std::move(handlers)),
      max_header_bytes_(max_header_bytes),
      match_("\r\n"),
      virtual_(2) {
  if (boundary.empty() || boundary.size() > kMaxBoundary ||
      boundary.find_first_of("\r\n") != std::string::npos) {
    throw MultipartError(
        fmt::format("invalid multipart boundary {}: it must be 1 to {} characters without CR or LF",
                    python_repr(boundary), kMaxBoundary));
  }
}

bool MultipartParser::done() const noexcept {
  return state_ == State::done;
}

std::size_t MultipartParser::buffered_bytes() const noexcept {
  return match_.size() + headers_.size();
}

void MultipartParser::fail(const std::string& what) const {
  throw MultipartError("malformed multipart body: " + what);
}

void MultipartParser::feed(std::string_view bytes) {
  if (state_ == State::failed)
    throw MultipartError("the multipart parser has already failed");
  try {
    feed_bytes(bytes);
  } catch (...) {
    state_ = State::failed;
    match_.clear();
    headers_.clear();
    throw;
  }
}

void MultipartParser::finish() {
  switch (state_) {
    case State::done:
      return;
    case State::failed:
      throw MultipartError("the multipart parser has already failed");
    case State::preamble:
      state_ = State::failed;
      fail(fmt::format("the body has no boundary line {}",
                       python_repr(std::string_view(delimiter_).substr(2))));
    case State::headers:
      state_ = State::failed;
      fail(fmt::format("the body ends inside the headers of part {}", part_count_));
    case State::body:
      state_ = State::failed;
      fail(fmt::format("the body ends inside part {}, before the closing boundary", part_count_));
    case State::after_delimiter:
    case State::second_dash:
    case State::padding:
    case State::expect_lf:
      state_ = State::failed;
      fail("the body ends inside a boundary line");
  }
}

void MultipartParser::feed_bytes(std::string_view in) {
  while (!in.empty()) {
    switch (state_) {
      case State::preamble:
      case State::body:
        in.remove_prefix(scan_for_delimiter(in));
        break;
      case State::after_delimiter:
      case State::second_dash:
      case State::padding:
      case State::expect_lf:
        after_delimiter(in.front());
        in.remove_prefix(1);
        break;
      case State::headers:
        in.remove_prefix(consume_headers(in));
        break;
      case State::done:
        return;  // the epilogue
      case State::failed:
        throw MultipartError("the multipart parser has already failed");
    }
  }
}

void MultipartParser::emit(std::string_view data) {
  if (state_ == State::body && !data.empty() && handlers_.on_part_data)
    handlers_.on_part_data(data);
}

// Consumes bytes of `in` in the preamble or a part's body, up to and including the next
// delimiter; returns how many. Bytes that may begin a delimiter at the end of `in` are held
// back in match_. The boundary holds no CR, so a delimiter can only begin at a CR: a
// held-back prefix that turns out not to be one is data as a whole.
std::size_t MultipartParser::scan_for_delimiter(std::string_view in) {
  if (!match_.empty()) {
    const std::size_t have = match_.size();
    const std::size_t n = std::min(delimiter_.size() - have, in.size());
    if (in.substr(0, n) == std::string_view(delimiter_).substr(have, n)) {
      if (have + n < delimiter_.size()) {
        match_.append(in.data(), n);
        return n;
      }
      match_.clear();
      virtual_ = 0;
      on_delimiter();
      return n;
    }
    const std::string held = match_.substr(virtual_);
    match_.clear();
    virtual_ = 0;
    emit(held);
  }
  std::size_t i = 0;
  while (true) {
    const void* cr = std::memchr(in.data() + i, '\r', in.size() - i);
    if (cr == nullptr) {
      emit(in);
      return in.size();
    }
    i = static_cast<std::size_t>(static_cast<const char*>(cr) - in.data());
    const std::size_t n = std::min(delimiter_.size(), in.size() - i);
    if (in.substr(i, n) == std::string_view(delimiter_).substr(0, n)) {
      emit(in.substr(0, i));
      if (n < delimiter_.size()) {
        match_.assign(in.substr(i));
        return in.size();
      }
      on_delimiter();
      return i + n;
    }
    ++i;
  }
}

void MultipartParser::on_delimiter() {
  if (state_ == State::body && handlers_.on_part_end)
    handlers_.on_part_end();
  state_ = State::after_delimiter;
}

// After a delimiter: "--" closes the body; otherwise optional spaces and CRLF, then a part.
void MultipartParser::after_delimiter(char c) {
  const auto unexpected = [&](std::string_view expected) {
    fail(fmt::format("the boundary line is followed by {} where {} was expected",
                     python_repr(std::string_view(&c, 1)), expected));
  };
  switch (state_) {
    case State::after_delimiter:
      if (c == '-') {
        state_ = State::second_dash;
      } else if (is_ows(c)) {
        state_ = State::padding;
      } else if (c == '\r') {
        state_ = State::expect_lf;
      } else {
        unexpected("CRLF or '--'");
      }
      return;
    case State::second_dash:
      if (c != '-')
        unexpected("'--'");
      state_ = State::done;
      return;
    case State::padding:
      if (c == '\r') {
        state_ = State::expect_lf;
      } else if (!is_ows(c)) {
        unexpected("CRLF");
      }
      return;
    case State::expect_lf:
      if (c != '\n')
        unexpected("CRLF");
      ++part_count_;
      // The CRLF that ended the boundary line starts the block, so an empty block (a part
      // without headers) ends at the same "\r\n\r\n" as any other.
      headers_.assign("\r\n");
      state_ = State::headers;
      return;
    default:
      return;
  }
}

std::size_t MultipartParser::consume_headers(std::string_view in) {
  const std::size_t old = headers_.size();
  const std::size_t room = max_header_bytes_ + 2 - old;
  const std::size_t take = std::min(in.size(), room);
  headers_.append(in.data(), take);
  const std::size_t end = headers_.find("\r\n\r\n", old >= 3 ? old - 3 : 0);
  if (end == std::string::npos) {
    if (headers_.size() >= max_header_bytes_ + 2) {
      fail(fmt::format("the headers of part {} are longer than {} bytes", part_count_,
                       max_header_bytes_));
    }
    return take;
  }
  const std::size_t consumed = end + 4 - old;
  const std::string block = headers_.substr(2, end);  // each header line with its CRLF
  headers_.clear();
  headers_.shrink_to_fit();
  begin_part(block);
  return consumed;
}

void MultipartParser::begin_part(std::string_view block) {
  const std::size_t part = part_count_;
  std::vector<std::pair<std::string, std::string>> fields;  // lower-case name, value
  while (!block.empty()) {
    const std::size_t eol = block.find("\r\n");
    const std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol + 2);
    if (line.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
      fail(fmt::format("a header line of part {} holds a stray CR, LF or NUL: {}", part,
                       python_repr(line)));
    }
    if (line.empty())
      fail(fmt::format("the headers of part {} hold an empty line", part));
    if (is_ows(line.front())) {
      // Obsolete line folding: the line continues the previous header.
      if (fields.empty())
        fail(fmt::format("the headers of part {} begin with a continuation line", part));
      fields.back().second += ' ';
      fields.back().second += trim_ows(line);
      continue;
    }
    const std::size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || name.empty() ||
        !std::all_of(name.begin(), name.end(), is_tchar)) {
      fail(fmt::format("malformed header line in part {}: {}", part, python_repr(line)));
    }
    fields.emplace_back(to_lower(name), std::string(trim_ows(line.substr(colon + 1))));
  }

  const auto single = [&](std::string_view name) -> const std::string* {
    const std::string* found = nullptr;
    for (const auto& [key, value] : fields) {
      if (key != name)
        continue;
      if (found != nullptr)
        fail(fmt::format("part {} has more than one {} header", part, name));
      found = &value;
    }
    return found;
  };
  MultipartPartHeaders headers;
  const std::string* disposition = single("content-disposition");
  if (disposition == nullptr)
    fail(fmt::format("part {} has no Content-Disposition header", part));
  std::string error;
  const auto parsed = parse_header_value(*disposition, error);
  if (!parsed)
    fail(fmt::format("the Content-Disposition of part {} is malformed: {}", part, error));
  if (!iequals(parsed->value, "form-data")) {
    fail(fmt::format("the Content-Disposition of part {} is {}, not form-data", part,
                     python_repr(parsed->value)));
  }
  const std::string* name = find_param(*parsed, "name");
  if (name == nullptr)
    fail(fmt::format("the Content-Disposition of part {} has no name", part));
  headers.name = *name;
  if (const std::string* filename = find_param(*parsed, "filename"))
    headers.filename = *filename;
  if (const std::string* extended = find_param(*parsed, "filename*")) {
    if (auto decoded = decode_ext_value(*extended, part))
      headers.filename = std::move(*decoded);
  }
  const std::string* content_type = single("content-type");
  headers.content_type = content_type != nullptr ? *content_type : "text/plain";

  state_ = State::body;
  match_.assign("\r\n");
  virtual_ = 2;
  if (handlers_.on_part_begin)
    handlers_.on_part_begin(headers);
}

// ---------------------------------------------------------------------------------------------
// The writer.

namespace {

std::string random_boundary() {
  std::random_device random;  // the kernel's generator: not predictable from the data
  std::string out = "rex-form-";
  for (int i = 0; i < 12; ++i)
    out += fmt::format("{:08x}", random());
  return out.substr(0, 9 + 56);
}

// Quotes a Content-Disposition parameter value; CR, LF and NUL have no place in a header.
std::string quote_param(std::string_view what, std::string_view value) {
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
    throw ValueError(fmt::format("multipart {} {} holds CR, LF or NUL, which a header cannot carry",
                                 what, python_repr(value)));
  }
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

// Watches a byte stream for a string, across the chunks it arrives in.
class OccurrenceWatch {
 public:
  explicit OccurrenceWatch(std::string_view needle) : needle_(needle) {}
  void scan(std::string_view chunk) {
    if (seen_ || needle_.empty())
      return;
    // Across the seam: the kept tail of earlier chunks with the start of this one.
    std::string seam = tail_;
    seam.append(chunk.substr(0, std::min(chunk.size(), needle_.size() - 1)));
    if (seam.find(needle_) != std::string::npos || chunk.find(needle_) != std::string_view::npos) {
      seen_ = true;
      return;
    }
    const std::size_t keep = needle_.size() - 1;
    if (chunk.size() >= keep) {
      tail_.assign(chunk.substr(chunk.size() - keep));
    } else {
      tail_.append(chunk);
      if (tail_.size() > keep)
        tail_.erase(0, tail_.size() - keep);
    }
  }
  bool seen() const { return seen_; }

 private:
  std::string needle_;
  std::string tail_;
  bool seen_ = false;
};

// Writes the body once with `boundary`; false when the boundary turned up in the content.
bool write_body(int fd, const std::string& body_name, const std::string& boundary,
                const std::vector<MultipartField>& fields, const MultipartFile& file,
                const std::string& file_name) {
  for (const auto& field : fields) {
    if (field.name.find(boundary) != std::string::npos ||
        field.value.find(boundary) != std::string::npos) {
      return false;
    }
    const std::string head = fmt::format("--{}\r\nContent-Disposition: form-data; name={}\r\n\r\n",
                                         boundary, quote_param("field name", field.name));
    rex::detail::write_all(fd, head, body_name);
    rex::detail::write_all(fd, field.value, body_name);
    rex::detail::write_all(fd, "\r\n", body_name);
  }
  const std::string head = fmt::format(
      "--{}\r\nContent-Disposition: form-data; name={}; filename={}\r\nContent-Type: {}\r\n\r\n",
      boundary, quote_param("field name", file.name), quote_param("file name", file.filename),
      file.content_type);
  if (head.find(boundary, 2 + boundary.size()) != std::string::npos)
    return false;
  rex::detail::write_all(fd, head, body_name);

  rex::detail::UniqueFd in(::open(file_name.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0)
    throw_os_error(errno, file_name);
  struct stat st {};
  if (::fstat(in.get(), &st) != 0)
    throw_os_error(errno, file_name);
  if (S_ISDIR(st.st_mode))
    throw_os_error(EISDIR, file_name);
  OccurrenceWatch watch(boundary);
  std::vector<char> buffer(1 << 18);
  while (true) {
    const ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw_os_error(errno, file_name);
    }
    if (n == 0)
      break;
    const std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    watch.scan(chunk);
    if (watch.seen())
      return false;
    rex::detail::write_all(fd, chunk, body_name);
  }
  rex::detail::write_all(fd, fmt::format("\r\n--{}--\r\n", boundary), body_name);
  return true;
}

}  // namespace

std::string write_multipart_body(const std::filesystem::path& body_path,
                                 const std::vector<MultipartField>& fields,
                                 const MultipartFile& file) {
  rex::detail::reject_nul(body_path.native());
  rex::detail::reject_nul(file.path.native());
  if (file.content_type.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
    throw ValueError(fmt::format("multipart content type {} holds CR, LF or NUL",
                                 python_repr(file.content_type)));
  }
  const std::string body_name = body_path.native();
  const std::string file_name = file.path.native();
  std::string boundary;
  rex::detail::replace_file(
      body_name,
      [&](int fd) {
        // A random boundary of 56 hex digits is never in real data; if it ever were, another
        // one is drawn and the body written again.
        for (int attempt = 0;; ++attempt) {
          boundary = random_boundary();
          if (write_body(fd, body_name, boundary, fields, file, file_name))
            return;
          if (attempt == 8)
            throw OSError("could not find a multipart boundary absent from the data");
          if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0)
            throw_os_error(errno, body_name);
        }
      },
      {});
  return "multipart/form-data; boundary=" + boundary;
}

}  // namespace rex::http
