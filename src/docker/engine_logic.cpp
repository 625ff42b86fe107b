#include "docker/engine_logic.hpp"

#include <rex/http/url.hpp>

#include <fmt/format.h>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace rex::docker::detail {
namespace {

namespace json = boost::json;

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::string string_field(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr || !v->is_string())
    return {};
  return std::string(v->get_string());
}

std::uint64_t unsigned_field(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr)
    return 0;
  if (v->is_uint64())
    return v->get_uint64();
  if (v->is_int64() && v->get_int64() > 0)
    return static_cast<std::uint64_t>(v->get_int64());
  if (v->is_double() && v->get_double() > 0)
    return static_cast<std::uint64_t>(v->get_double());
  return 0;
}

}  // namespace

EngineAddress engine_address(const EngineConfig& config) {
  const std::string_view host = config.host;
  EngineAddress out;
  if (host.empty() || host.starts_with("unix://")) {
    const std::string path(host.empty() ? kDefaultSocket : host.substr(7));
    if (path.empty() || path.front() != '/') {
      throw std::invalid_argument(
          fmt::format("container engine host '{}': a unix socket needs an absolute path, as in "
                      "unix:///var/run/docker.sock",
                      host));
    }
    if (config.tls) {
      throw std::invalid_argument(fmt::format(
          "container engine host '{}': TLS is for tcp:// hosts, not unix sockets", host));
    }
    out.socket_path = path;
    out.endpoint = "unix://" + path;
    out.base_url = http::unix_socket_url(path);
    out.local = true;
  } else if (host.starts_with("tcp://")) {
    std::string_view rest = host.substr(6);
    const auto slash = rest.find('/');
    const std::string_view authority = rest.substr(0, slash);
    const std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash);
    if (authority.empty()) {
      throw std::invalid_argument(
          fmt::format("container engine host '{}': no host name after tcp://", host));
    }
    // A port is there when the last ':' comes after any IPv6 bracket.
    const auto colon = authority.rfind(':');
    const auto bracket = authority.rfind(']');
    const bool has_port =
        colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket);
    std::string with_port(authority);
    if (!has_port)
      with_port += config.tls ? ":2376" : ":2375";
    out.endpoint = "tcp://" + with_port + std::string(prefix);
    out.base_url = (config.tls ? "https://" : "http://") + with_port + std::string(prefix);
    try {
      http::parse_url(out.base_url);
    } catch (const http::InvalidUrlError& e) {
      throw std::invalid_argument(
          fmt::format("container engine host '{}' cannot be used: {}", host, e.what()));
    }
  } else {
    const auto scheme_end = host.find("://");
    const std::string scheme(scheme_end == std::string_view::npos ? host
                                                                  : host.substr(0, scheme_end));
    throw std::invalid_argument(
        fmt::format("container engine host '{}': scheme '{}' is not supported; use unix:///PATH or "
                    "tcp://HOST:PORT",
                    host, scheme));
  }
  return out;
}

http::ClientConfig engine_client_config(const EngineConfig& config) {
  http::ClientConfig c;
  c.timeout = config.request_timeout;
  c.retry.max_retries = 0;  // a POST sent twice could create two containers
  if (config.tls) {
    c.verify_peer = config.tls_verify;
    if (!config.cert_path.empty()) {
      const std::filesystem::path dir(config.cert_path);
      if (config.tls_verify)
        c.ca_file = (dir / "ca.pem").string();
      std::error_code ignored;
      if (std::filesystem::exists(dir / "cert.pem", ignored) &&
          std::filesystem::exists(dir / "key.pem", ignored)) {
        c.cert_file = (dir / "cert.pem").string();
        c.key_file = (dir / "key.pem").string();
      }
    }
  }
  return c;
}

std::string engine_message_of(std::string_view body) {
  boost::system::error_code ec;
  const json::value parsed = json::parse(body, ec);
  if (!ec && parsed.is_object()) {
    const auto& o = parsed.get_object();
    std::string message = string_field(o, "message");
    const std::string cause = string_field(o, "cause");
    if (!cause.empty() && message.find(cause) == std::string::npos)
      message += message.empty() ? cause : " (cause: " + cause + ")";
    if (!message.empty())
      return message;
  }
  const std::string_view text = trim(body);
  return std::string(text.substr(0, 1000));
}

std::optional<std::string> demultiplex_logs(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  std::size_t at = 0;
  while (at < raw.size()) {
    if (raw.size() - at < 8)
      return std::nullopt;
    const auto* h = reinterpret_cast<const unsigned char*>(raw.data() + at);
    // stdin (0), stdout (1), stderr (2); the next three bytes are always zero.
    if (h[0] > 2 || h[1] != 0 || h[2] != 0 || h[3] != 0)
      return std::nullopt;
    const std::size_t size = (std::size_t{h[4]} << 24) | (std::size_t{h[5]} << 16) |
                             (std::size_t{h[6]} << 8) | std::size_t{h[7]};
    at += 8;
    if (raw.size() - at < size)
      return std::nullopt;
    out.append(raw.substr(at, size));
    at += size;
  }
  return out;
}

std::string last_lines(std::string_view text, std::size_t count) {
  if (count == 0)
    return {};
  // Walk back over line ends; the last line's own '\n' does not start another line.
  std::size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n')
    --end;
  for (std::size_t lines = 1; end > 0; ++lines) {
    const std::size_t newline = text.rfind('\n', end - 1);
    if (newline == std::string_view::npos)
      break;
    if (lines == count)
      return std::string(text.substr(newline + 1));
    end = newline;
  }
  return std::string(text);
}

ImageReference split_image_reference(std::string_view name) {
  if (name.find('@') != std::string_view::npos)
    return {std::string(name), ""};
  const auto slash = name.rfind('/');
  const auto colon = name.rfind(':');
  // A ':' before the last '/' belongs to a registry's port, not to a tag.
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash))
    return {std::string(name.substr(0, colon)), std::string(name.substr(colon + 1))};
  return {std::string(name), "latest"};
}

PullProgress PullProgressTracker::update(const boost::json::object& line) {
  PullProgress p;
  if (line.contains("error") || line.contains("errorDetail")) {
    const auto* error = line.if_contains("error");
    std::string message =
        error != nullptr && error->is_string() ? std::string(error->get_string()) : "";
    if (const auto* detail = line.if_contains("errorDetail"); detail && detail->is_object()) {
      const std::string detailed = string_field(detail->get_object(), "message");
      if (message.empty())
        message = detailed;
    }
    if (message.empty())
      message = json::serialize(line);
    if (!error_)
      error_ = message;
    p.status = message;
  } else {
    p.status = string_field(line, "status");
    // "Pulling from library/x" names the tag in "id": a whole-image line like "Digest: ...".
    if (!p.status.starts_with("Pulling from"))
      p.layer = string_field(line, "id");
  }
  if (!p.layer.empty()) {
    Layer& layer = layers_[p.layer];
    const auto* detail = line.if_contains("progressDetail");
    const bool downloading = p.status == "Downloading";
    if (downloading && detail != nullptr && detail->is_object()) {
      std::uint64_t current = unsigned_field(detail->get_object(), "current");
      const std::uint64_t total = unsigned_field(detail->get_object(), "total");
      if (layer.total == 0)
        layer.total = total;
      // A download resumed after a broken connection counts from 0 towards what was left.
      const std::uint64_t resumed_at = total > 0 && total < layer.total ? layer.total - total : 0;
      current += resumed_at;
      // The engine prints a full bar also when the connection breaks (then it retries): the
      // download is complete only at "Verifying Checksum" / "Download complete".
      if (layer.total > 0 && current >= layer.total)
        current = layer.current;
      // Counts never go back, also when a retry starts over from byte 0.
      layer.current = std::max(layer.current, current);
    } else if (p.status == "Verifying Checksum" || p.status == "Download complete" ||
               p.status == "Extracting" || p.status == "Pull complete") {
      layer.current = std::max(layer.current, layer.total);  // downloaded: all of it
    }
  }
  for (const auto& [id, layer] : layers_) {
    p.bytes_done += std::min(layer.current, layer.total == 0 ? layer.current : layer.total);
    p.bytes_total += layer.total;
  }
  if (p.bytes_total > 0) {
    p.bytes_done = std::min(p.bytes_done, p.bytes_total);
    p.percent = static_cast<double>(p.bytes_done) * 100.0 / static_cast<double>(p.bytes_total);
  }
  return p;
}

void LineSplitter::feed(std::string_view piece,
                        const std::function<void(std::string_view)>& on_line) {
  while (!piece.empty()) {
    const auto newline = piece.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(piece);
      return;
    }
    if (pending_.empty()) {
      on_line(piece.substr(0, newline));
    } else {
      pending_.append(piece.substr(0, newline));
      const std::string line = std::move(pending_);
      pending_.clear();
      on_line(line);
    }
    piece.remove_prefix(newline + 1);
  }
}

void LineSplitter::finish(const std::function<void(std::string_view)>& on_line) {
  if (pending_.empty())
    return;
  const std::string line = std::move(pending_);
  pending_.clear();
  on_line(line);
}

namespace {

std::int64_t int_field(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr)
    return 0;
  if (v->is_int64())
    return v->get_int64();
  if (v->is_uint64())
    return static_cast<std::int64_t>(v->get_uint64());
  if (v->is_double())
    return static_cast<std::int64_t>(v->get_double());
  return 0;
}

const json::object& object_field(const json::object& o, std::string_view key) {
  static const json::object empty;
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_object() ? v->get_object() : empty;
}

std::map<std::string, std::string> labels_field(const json::object& o) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : object_field(o, "Labels")) {
    if (value.is_string())
      out.emplace(std::string(key), std::string(value.get_string()));
  }
  return out;
}

std::uint64_t counter(std::int64_t v) {
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

}  // namespace

std::string string_field_of(const boost::json::object& o, std::string_view key) {
  return string_field(o, key);
}

std::vector<ImageSummary> parse_image_list(const boost::json::value& answer) {
  if (!answer.is_array()) {
    throw std::invalid_argument(
        fmt::format("the image list is not a JSON array: {}", json::serialize(answer)));
  }
  std::vector<ImageSummary> out;
  for (const auto& item : answer.get_array()) {
    if (!item.is_object())
      continue;
    const auto& o = item.get_object();
    ImageSummary image;
    image.id = string_field(o, "Id");
    if (const auto* tags = o.if_contains("RepoTags"); tags && tags->is_array()) {
      for (const auto& t : tags->get_array()) {
        if (t.is_string())
          image.tags.emplace_back(t.get_string());
      }
    }
    image.labels = labels_field(o);
    image.created = int_field(o, "Created");
    image.size = int_field(o, "Size");
    out.push_back(std::move(image));
  }
  return out;
}

ContainerStats parse_container_stats(const boost::json::object& answer) {
  ContainerStats stats;
  const json::object& cpu = object_field(answer, "cpu_stats");
  const json::object& previous = object_field(answer, "precpu_stats");
  const std::int64_t used = int_field(object_field(cpu, "cpu_usage"), "total_usage") -
                            int_field(object_field(previous, "cpu_usage"), "total_usage");
  const std::int64_t system =
      int_field(cpu, "system_cpu_usage") - int_field(previous, "system_cpu_usage");
  stats.cpu_count = static_cast<int>(int_field(cpu, "online_cpus"));
  if (stats.cpu_count <= 0) {
    if (const auto* per = object_field(cpu, "cpu_usage").if_contains("percpu_usage");
        per && per->is_array())
      stats.cpu_count = static_cast<int>(per->get_array().size());
  }
  // The share of the machine's CPU time that went to the container, scaled to its CPUs: Docker's
  // own formula, over all its CPUs together.
  if (used > 0 && system > 0)
    stats.cpu_percent =
        std::min(100.0, 100.0 * static_cast<double>(used) / static_cast<double>(system));
  const json::object& memory = object_field(answer, "memory_stats");
  const std::uint64_t usage = counter(int_field(memory, "usage"));
  // cgroup v2 names the reclaimable cache inactive_file, v1 total_inactive_file.
  const json::object& detail = object_field(memory, "stats");
  std::uint64_t cache = counter(int_field(detail, "inactive_file"));
  if (cache == 0)
    cache = counter(int_field(detail, "total_inactive_file"));
  stats.memory_used = usage > cache ? usage - cache : usage;
  stats.memory_limit = counter(int_field(memory, "limit"));
  return stats;
}

std::vector<ContainerSummary> parse_container_list(const boost::json::value& answer) {
  if (!answer.is_array()) {
    throw std::invalid_argument(
        fmt::format("the container list is not a JSON array: {}", json::serialize(answer)));
  }
  std::vector<ContainerSummary> out;
  for (const auto& item : answer.get_array()) {
    if (!item.is_object())
      continue;
    const auto& o = item.get_object();
    ContainerSummary c;
    c.id = string_field(o, "Id");
    c.image = string_field(o, "Image");
    c.state = string_field(o, "State");
    if (const auto* names = o.if_contains("Names"); names && names->is_array()) {
      for (const auto& n : names->get_array()) {
        if (n.is_string())
          c.names.emplace_back(n.get_string());
      }
    }
    if (const auto* labels = o.if_contains("Labels"); labels && labels->is_object()) {
      for (const auto& [key, value] : labels->get_object()) {
        if (value.is_string())
          c.labels.emplace(std::string(key), std::string(value.get_string()));
      }
    }
    if (const auto* created = o.if_contains("Created"); created && created->is_int64())
      c.created = created->get_int64();
    else if (created && created->is_uint64())
      c.created = static_cast<std::int64_t>(created->get_uint64());
    out.push_back(std::move(c));
  }
  return out;
}

std::string label_filters_json(const std::vector<std::string>& label_filters) {
  json::array labels;
  for (const auto& f : label_filters)
    labels.emplace_back(f);
  json::object filters;
  filters["label"] = std::move(labels);
  return json::serialize(filters);
}

}  // namespace rex::docker::detail
