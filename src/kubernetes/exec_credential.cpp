#include <rex/core/text.hpp>
#include <rex/kubernetes/exec_credential.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/process_runner.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "core/spawn.hpp"

#include <algorithm>
#include <ctime>

namespace rex::kubernetes {

namespace json = boost::json;

namespace {

std::string member(const json::object& o, std::string_view key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null())
    return {};
  if (!v->is_string())
    throw KubeconfigError(fmt::format("{}: status.{} is not a string", where, key));
  return std::string(v->get_string());
}

int digits(std::string_view s, std::size_t at, std::size_t n, const std::string& where) {
  if (at + n > s.size())
    throw KubeconfigError(fmt::format("{}: expirationTimestamp {:?} is not RFC 3339", where, s));
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9')
      throw KubeconfigError(fmt::format("{}: expirationTimestamp {:?} is not RFC 3339", where, s));
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// RFC 3339: 2026-11-25T10:00:00Z, with optional fractions and a numeric offset.
std::chrono::system_clock::time_point rfc3339(std::string_view s, const std::string& where) {
  auto bad = [&] {
    return KubeconfigError(fmt::format("{}: expirationTimestamp {:?} is not RFC 3339", where, s));
  };
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':')
    throw bad();
  std::tm tm{};
  tm.tm_year = digits(s, 0, 4, where) - 1900;
  tm.tm_mon = digits(s, 5, 2, where) - 1;
  tm.tm_mday = digits(s, 8, 2, where);
  tm.tm_hour = digits(s, 11, 2, where);
  tm.tm_min = digits(s, 14, 2, where);
  tm.tm_sec = digits(s, 17, 2, where);
  if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60)
    throw bad();
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9')
      ++i;
    if (i == start)
      throw bad();
  }
  long offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    offset = (digits(s, i + 1, 2, where) * 60L + digits(s, i + 4, 2, where)) * 60L;
    if (s[i] == '-')
      offset = -offset;
    i += 6;
  } else {
    throw bad();
  }
  if (i != s.size())
    throw bad();
  // Kept within what the clocks hold in nanoseconds: before 1970 is already past, and
  // beyond about 2190 is never in practice.
  constexpr std::time_t kLatest = 7'000'000'000;
  const std::time_t t = std::clamp<std::time_t>(::timegm(&tm) - offset, 0, kLatest);
  return std::chrono::system_clock::from_time_t(t);
}

std::string command_line(const ExecPlugin& p) {
  std::string out = shell_quote(p.command);
  for (const auto& a : p.args)
    out += " " + shell_quote(a);
  return out;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  try {
    return rfc3339(text, "a time");
  } catch (const KubeconfigError&) {
    return std::nullopt;
  }
}

ExecCredential parse_exec_credential(std::string_view output, const ExecPlugin& plugin) {
  const std::string where = fmt::format("the exec plugin {}", shell_quote(plugin.command));
  boost::system::error_code ec;
  const json::value v = json::parse(output, ec);
  if (ec || !v.is_object())
    throw KubeconfigError(fmt::format("{} printed no ExecCredential (not a JSON object): {:?}",
                                      where, output.substr(0, 200)));
  const json::object& o = v.get_object();
  const json::value* api = o.if_contains("apiVersion");
  const std::string api_version =
      api != nullptr && api->is_string() ? std::string(api->get_string()) : std::string("(none)");
  if (api_version != plugin.api_version)
    throw KubeconfigError(
        fmt::format("{} printed apiVersion {:?}, but its kubeconfig entry says {}", where,
                    api_version, plugin.api_version));
  const json::value* kind = o.if_contains("kind");
  if (kind == nullptr || !kind->is_string() || kind->get_string() != "ExecCredential")
    throw KubeconfigError(
        fmt::format("{} printed something other than kind ExecCredential", where));
  const json::value* status = o.if_contains("status");
  if (status == nullptr || !status->is_object())
    throw KubeconfigError(fmt::format("{} printed an ExecCredential without a status", where));
  const json::object& st = status->get_object();
  ExecCredential c;
  c.token = member(st, "token", where);
  c.client_cert_pem = member(st, "clientCertificateData", where);
  c.client_key_pem = member(st, "clientKeyData", where);
  if (c.client_cert_pem.empty() != c.client_key_pem.empty())
    throw KubeconfigError(fmt::format(
        "{}: status has clientCertificateData or clientKeyData without the other", where));
  if (c.token.empty() && c.client_cert_pem.empty())
    throw KubeconfigError(fmt::format(
        "{}: status has neither a token nor clientCertificateData and clientKeyData", where));
  if (const std::string at = member(st, "expirationTimestamp", where); !at.empty())
    c.expires = rfc3339(at, where);
  return c;
}

std::string exec_info(const ExecPlugin& plugin, const ClusterAccess& cluster) {
  json::object spec{{"interactive", false}};
  if (plugin.provide_cluster_info) {
    json::object c{{"server", cluster.server}};
    if (!cluster.tls_server_name.empty())
      c["tls-server-name"] = cluster.tls_server_name;
    if (cluster.insecure_skip_tls_verify)
      c["insecure-skip-tls-verify"] = true;
    if (!cluster.ca_pem.empty())
      c["certificate-authority-data"] = base64_encode(cluster.ca_pem);
    spec["cluster"] = std::move(c);
  }
  return json::serialize(json::object{
      {"apiVersion", plugin.api_version}, {"kind", "ExecCredential"}, {"spec", std::move(spec)}});
}

asio::awaitable<ExecCredential> run_exec_plugin(const ExecPlugin& plugin,
                                                const ClusterAccess& cluster,
                                                std::chrono::steady_clock::duration timeout) {
  const std::string what = command_line(plugin);
  if (plugin.interactive_mode == "Always")
    throw KubeconfigError(fmt::format(
        "the exec plugin {} needs a terminal (interactiveMode Always), and rex has none to give it",
        what));
  Command command;
  std::vector<std::string> argv{plugin.command};
  argv.insert(argv.end(), plugin.args.begin(), plugin.args.end());
  command.command = std::move(argv);
  std::map<std::string, std::string> env = rex::detail::current_environment();
  for (const auto& [name, value] : plugin.env)
    env[name] = value;
  env["KUBERNETES_EXEC_INFO"] = exec_info(plugin, cluster);
  command.env = std::move(env);
  command.timeout = std::chrono::duration<double>(timeout).count();
  CommandResponse response;
  try {
    response = co_await run_command(std::move(command));
  } catch (const CommandTimeoutError&) {
    throw KubeconfigError(
        fmt::format("the exec plugin {} did not finish within {}", what, seconds_text(timeout)));
  } catch (const SwerexException& e) {
    std::string message = fmt::format("cannot run the exec plugin {}: {}", what, e.what());
    if (!plugin.install_hint.empty())
      message += "\n" + plugin.install_hint;
    throw KubeconfigError(message);
  }
  if (response.exit_code != 0) {
    std::string err = response.stderr_;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' '))
      err.pop_back();
    throw KubeconfigError(fmt::format("the exec plugin {} failed (exit code {}){}{}", what,
                                      response.exit_code ? *response.exit_code : -1,
                                      err.empty() ? "" : ": ", err));
  }
  co_return parse_exec_credential(response.stdout_, plugin);
}

}  // namespace rex::kubernetes
