#include <rex/http/sse.hpp>

namespace rex::http {

std::string encode_sse_event(std::string_view name, std::string_view data, std::string_view id) {
  std::string out;
  out.reserve(name.size() + data.size() + id.size() + 24);
  if (!id.empty())
    out.append("id: ").append(id).append("\n");
  out.append("event: ").append(name).append("\n");
  while (true) {
    const auto end = data.find_first_of("\r\n");
    out.append("data: ").append(data.substr(0, end)).append("\n");
    if (end == std::string_view::npos)
      break;
    const bool crlf = data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n';
    data.remove_prefix(end + (crlf ? 2 : 1));
  }
  out.append("\n");
  return out;
}

void SseParser::feed(std::string_view piece, std::vector<SseEvent>& out) {
  if (skip_lf_ && !piece.empty()) {
    skip_lf_ = false;
    if (piece.front() == '\n')
      piece.remove_prefix(1);
  }
  while (!piece.empty()) {
    const auto end = piece.find_first_of("\r\n");
    if (end == std::string_view::npos) {
      partial_.append(piece);
      return;
    }
    if (partial_.empty()) {
      line(piece.substr(0, end), out);
    } else {
      partial_.append(piece.substr(0, end));
      const std::string whole = std::move(partial_);
      partial_.clear();
      line(whole, out);
    }
    std::size_t next = end + 1;
    if (piece[end] == '\r') {
      if (next == piece.size())
        skip_lf_ = true;  // the LF of this CRLF may open the next piece
      else if (piece[next] == '\n')
        ++next;
    }
    piece.remove_prefix(next);
  }
}

void SseParser::line(std::string_view text, std::vector<SseEvent>& out) {
  if (text.empty()) {
    if (have_data_) {
      current_.id = last_id_;
      out.push_back(std::move(current_));
    }
    current_ = SseEvent{};
    have_data_ = false;
    return;
  }
  if (text.front() == ':')
    return;  // a comment (servers send them as keep-alives)
  const auto colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = text.substr(colon + 1);
    if (value.starts_with(' '))
      value.remove_prefix(1);
  }
  if (field == "event") {
    current_.event = value.empty() ? std::string_view("message") : value;
  } else if (field == "data") {
    if (have_data_)
      current_.data += '\n';
    current_.data.append(value);
    have_data_ = true;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos)
      last_id_ = value;
  }
  // "retry" and unknown fields carry nothing a reader here uses.
}

}  // namespace rex::http
