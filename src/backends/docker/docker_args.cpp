#include <rex/backends/docker/docker_args.hpp>
#include <rex/backends/docker/docker_config.hpp>
#include <rex/core/text.hpp>
#include <rex/deployment/config.hpp>

#include <fmt/format.h>
#include <boost/json/array.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "backends/docker/json_fields.hpp"

namespace rex {

namespace json = boost::json;

using detail::array_at;
using detail::host_config;
using detail::object_at;

namespace {

[[noreturn]] void fail(std::string message) {
  throw DeploymentConfigError(std::move(message));
}

double parse_number(std::string_view text, std::string_view what) {
  double value = 0;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || p != end || text.empty() || !std::isfinite(value))
    fail(fmt::format("{}: '{}' is not a number", what, text));
  return value;
}

std::int64_t parse_integer(std::string_view text, std::string_view what) {
  std::int64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || p != end || text.empty())
    fail(fmt::format("{}: '{}' is not an integer", what, text));
  return value;
}

bool parse_bool(std::string_view text, std::string_view what) {
  const std::string v = ascii_lower(text);
  if (v == "true" || v == "1")
    return true;
  if (v == "false" || v == "0")
    return false;
  fail(fmt::format("{}: '{}' is not true or false", what, text));
}

// One flag of docker run: its names, whether it takes a value, and what it does.
struct Flag {
  bool takes_value;
  void (*apply)(std::string_view value, json::object& body, std::optional<std::string>& platform);
};

void env(std::string_view v, json::object& body, std::optional<std::string>&) {
  if (v.empty())
    fail("docker_args: -e/--env needs NAME=value or NAME");
  std::string entry(v);
  if (entry.find('=') == std::string::npos) {
    // "-e NAME" passes this process's value on, as docker run does; unset means no entry.
    const char* ours = std::getenv(entry.c_str());
    if (!ours)
      return;
    entry += "=";
    entry += ours;
  }
  array_at(body, "Env").emplace_back(entry);
}

void volume(std::string_view v, json::object& body, std::optional<std::string>&) {
  if (v.find(':') == std::string_view::npos)
    fail(
        fmt::format("docker_args: -v/--volume '{}': expected SOURCE:TARGET[:OPTIONS] (anonymous "
                    "volumes are not supported)",
                    v));
  array_at(host_config(body), "Binds").emplace_back(v);
}

void workdir(std::string_view v, json::object& body, std::optional<std::string>&) {
  body["WorkingDir"] = v;
}

void user(std::string_view v, json::object& body, std::optional<std::string>&) {
  body["User"] = v;
}

void label(std::string_view v, json::object& body, std::optional<std::string>&) {
  const auto eq = v.find('=');
  object_at(body, "Labels")[v.substr(0, eq)] =
      eq == std::string_view::npos ? std::string_view() : v.substr(eq + 1);
}

void memory(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["Memory"] = parse_size(v, "docker_args: --memory");
}

void memory_swap(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["MemorySwap"] = v == "-1" ? -1 : parse_size(v, "docker_args: --memory-swap");
}

void cpus(std::string_view v, json::object& body, std::optional<std::string>&) {
  const double n = parse_number(v, "docker_args: --cpus");
  if (n <= 0)
    fail(fmt::format("docker_args: --cpus: {} must be above 0", v));
  host_config(body)["NanoCpus"] = static_cast<std::int64_t>(std::llround(n * 1e9));
}

void pids_limit(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["PidsLimit"] = parse_integer(v, "docker_args: --pids-limit");
}

void shm_size(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["ShmSize"] = parse_size(v, "docker_args: --shm-size");
}

void ulimit(std::string_view v, json::object& body, std::optional<std::string>&) {
  const auto eq = v.find('=');
  if (eq == std::string_view::npos || eq == 0)
    fail(fmt::format("docker_args: --ulimit '{}': expected NAME=SOFT[:HARD]", v));
  const auto limits = v.substr(eq + 1);
  const auto colon = limits.find(':');
  const std::int64_t soft = parse_integer(limits.substr(0, colon), "docker_args: --ulimit");
  const std::int64_t hard = colon == std::string_view::npos
                                ? soft
                                : parse_integer(limits.substr(colon + 1), "docker_args: --ulimit");
  json::object entry{{"Name", v.substr(0, eq)}, {"Soft", soft}, {"Hard", hard}};
  auto& list = array_at(host_config(body), "Ulimits");
  // A later --ulimit for the same name wins, as with docker run.
  for (auto& existing : list) {
    if (existing.is_object() && existing.as_object()["Name"] == entry["Name"]) {
      existing = std::move(entry);
      return;
    }
  }
  list.emplace_back(std::move(entry));
}

void network(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["NetworkMode"] = v;
}

void platform_flag(std::string_view v, json::object&, std::optional<std::string>& platform) {
  if (v.empty())
    fail("docker_args: --platform needs a value such as linux/amd64");
  platform = std::string(v);
}

void privileged(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["Privileged"] = v.empty() || parse_bool(v, "docker_args: --privileged");
}

void read_only(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["ReadonlyRootfs"] = v.empty() || parse_bool(v, "docker_args: --read-only");
}

void init(std::string_view v, json::object& body, std::optional<std::string>&) {
  host_config(body)["Init"] = v.empty() || parse_bool(v, "docker_args: --init");
}

void remove(std::string_view v, json::object&, std::optional<std::string>&) {
  if (!v.empty())
    (void)parse_bool(v, "docker_args: --rm");
}

void cap_add(std::string_view v, json::object& body, std::optional<std::string>&) {
  array_at(host_config(body), "CapAdd").emplace_back(v);
}

void cap_drop(std::string_view v, json::object& body, std::optional<std::string>&) {
  array_at(host_config(body), "CapDrop").emplace_back(v);
}

void security_opt(std::string_view v, json::object& body, std::optional<std::string>&) {
  array_at(host_config(body), "SecurityOpt").emplace_back(v);
}

void tmpfs(std::string_view v, json::object& body, std::optional<std::string>&) {
  const auto colon = v.find(':');
  object_at(host_config(body), "Tmpfs")[v.substr(0, colon)] =
      colon == std::string_view::npos ? std::string_view() : v.substr(colon + 1);
}

void add_host(std::string_view v, json::object& body, std::optional<std::string>&) {
  array_at(host_config(body), "ExtraHosts").emplace_back(v);
}

void hostname(std::string_view v, json::object& body, std::optional<std::string>&) {
  body["Hostname"] = v;
}

void dns(std::string_view v, json::object& body, std::optional<std::string>&) {
  array_at(host_config(body), "Dns").emplace_back(v);
}

const std::map<std::string_view, Flag>& flags() {
  static const std::map<std::string_view, Flag> table = {
      {"-e", {true, env}},
      {"--env", {true, env}},
      {"-v", {true, volume}},
      {"--volume", {true, volume}},
      {"-w", {true, workdir}},
      {"--workdir", {true, workdir}},
      {"-u", {true, user}},
      {"--user", {true, user}},
      {"-l", {true, label}},
      {"--label", {true, label}},
      {"-m", {true, memory}},
      {"--memory", {true, memory}},
      {"--memory-swap", {true, memory_swap}},
      {"--cpus", {true, cpus}},
      {"--pids-limit", {true, pids_limit}},
      {"--shm-size", {true, shm_size}},
      {"--ulimit", {true, ulimit}},
      {"--network", {true, network}},
      {"--net", {true, network}},
      {"--platform", {true, platform_flag}},
      {"--privileged", {false, privileged}},
      {"--read-only", {false, read_only}},
      {"--init", {false, init}},
      {"--rm", {false, remove}},
      {"--cap-add", {true, cap_add}},
      {"--cap-drop", {true, cap_drop}},
      {"--security-opt", {true, security_opt}},
      {"--tmpfs", {true, tmpfs}},
      {"--add-host", {true, add_host}},
      {"-h", {true, hostname}},
      {"--hostname", {true, hostname}},
      {"--dns", {true, dns}},
  };
  return table;
}

}  // namespace

void apply_docker_args(const std::vector<std::string>& args, json::object& body,
                       std::optional<std::string>& platform) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (arg.starts_with("--")) {
      const auto eq = arg.find('=');
      if (eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      }
    } else if (arg.size() > 2 && arg[0] == '-') {
      name = arg.substr(0, 2);  // "-eNAME=value"
      value = arg.substr(2);
      if (value->starts_with('='))
        value = value->substr(1);
    } else if (!arg.starts_with('-') || arg.size() < 2) {
      fail(
          fmt::format("docker_args: '{}' is not a flag (an image or a command cannot be given "
                      "here; use the image field)",
                      arg));
    }
    const auto it = flags().find(name);
    if (it == flags().end())
      fail(
          fmt::format("docker_args: unsupported flag '{}' (supported: -e, -v, -w, -u, -l, -m, "
                      "--memory-swap, --cpus, --pids-limit, --shm-size, --ulimit, --network, "
                      "--platform, --privileged, --read-only, --init, --rm, --cap-add, "
                      "--cap-drop, --security-opt, --tmpfs, --add-host, --hostname, --dns; "
                      "other create fields go in create_options)",
                      name));
    const Flag& flag = it->second;
    if (flag.takes_value && !value) {
      if (i + 1 >= args.size())
        fail(fmt::format("docker_args: '{}' needs a value", name));
      value = args[++i];
    }
    flag.apply(value.value_or(std::string_view()), body, platform);
  }
}

}  // namespace rex
