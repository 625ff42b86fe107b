#include "gateway/transcript.hpp"

#include <rex/core/log.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gateway/session_record.hpp"

namespace rex::gateway {

namespace json = boost::json;

std::string clip(std::string_view text) {
  if (text.size() <= kLogBodyLimit)
    return std::string(text);
  return fmt::format("{}... [{} bytes]", text.substr(0, kLogBodyLimit), text.size());
}

json::value body_for_log(std::string_view body) {
  boost::system::error_code ec;
  if (body.size() <= kLogBodyLimit) {
    json::value v = json::parse(body, ec);
    if (!ec)
      return v;
  }
  return json::value(utf8_backslashreplace(clip(body)));
}

bool one_line_json(std::string_view text) {
  if (text.find_first_of("\r\n") != std::string_view::npos)
    return false;
  // The values go in an arena on the stack (or what it takes after that), dropped at once.
  unsigned char space[4096];
  json::monotonic_resource arena(space, sizeof space);
  boost::system::error_code ec;
  json::parse(text, ec, &arena);
  return !ec;
}

json::value LoggedBody::json() const {
  return whole_ ? body_for_log(text_) : json::value(utf8_backslashreplace(text_));
}

void LoggedBody::append_to(std::string& line) const {
  if (whole_ && one_line_json(text_))
    line.append(text_);
  else
    line.append(json::serialize(json()));
}

void end_line(std::string& text, double unix_seconds, std::string_view request_id,
              std::string_view actor, double since) {
  if (text.size() > 1)
    text.push_back(',');
  if (since > 0)
    text.append(fmt::format(R"("duration":{:.3f},)", std::max(0.0, unix_seconds - since)));
  text.append(R"("time":")").append(iso_time(unix_seconds)).append(R"(","request_id":)");
  text.append(json::serialize(json::string_view(request_id))).append(R"(,"actor":)");
  text.append(json::serialize(json::string_view(actor))).append("}\n");
}

bool append_line(rex::detail::UniqueFd& file, const std::filesystem::path& path,
                 std::string_view line) {
  if (file.get() < 0) {
    file.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    if (file.get() < 0) {
      logging::error("gateway: cannot open {}: {}", path.string(), std::strerror(errno));
      return false;
    }
  }
  // One write per line: with O_APPEND, lines of concurrent calls never interleave.
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(file.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace rex::gateway
