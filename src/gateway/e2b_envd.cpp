// The E2B-compatible in-sandbox API: what E2B's SDKs send to E2B_SANDBOX_URL (E2B's in-sandbox
// daemon, "envd"), served by the gateway on its own listener. A request names its sandbox in
// the E2b-Sandbox-Id header and proves itself with X-Access-Token, the envdAccessToken the
// control API gave for that sandbox; it then counts as activity of that session.
//
// Served: GET /health; GET /files (a file's bytes) and POST /files (multipart, one or several
// files); filesystem.Filesystem's Stat, ListDir, MakeDir, Remove and Move in the Connect
// protocol with the JSON codec; process.Process/Start, which runs a command to its end and
// answers its whole stream at once, so List finds no process running and the calls that select
// one (SendSignal, SendInput, Connect...) answer not_found. Paths are the sandbox's; a
// relative one is relative to the session's working directory, and the local provider keeps
// them inside it, as the gateway's own file calls do.
#include <rex/core/random.hpp>
#include <rex/core/text.hpp>
#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/server/admission.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gateway/api_error.hpp"
#include "gateway/gateway_impl.hpp"

namespace rex::gateway {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
namespace fs = std::filesystem;
using server::Answer;
using server::FileAnswer;
using server::Request;

std::string envd_access_token(const SessionRecord& rec) {
  // Derived from the sandbox's own server token, which only the gateway knows: nothing more to
  // store, the same after a restart, and it tells nothing about that token.
  const std::string message = "e2b-envd:" + rec.id;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), rec.token.data(), static_cast<int>(rec.token.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &n);
  return hex_of(digest, n);
}

namespace {

// A Connect error: its code names the HTTP status it travels with.
struct ConnectError : std::runtime_error {
  std::string code;
  ConnectError(std::string c, const std::string& message)
      : std::runtime_error(message), code(std::move(c)) {}
};

unsigned connect_status(std::string_view code) {
  static const std::map<std::string_view, unsigned> kStatus = {
      {"invalid_argument", 400},   {"failed_precondition", 400}, {"unauthenticated", 401},
      {"permission_denied", 403},  {"not_found", 404},           {"already_exists", 409},
      {"resource_exhausted", 429}, {"unimplemented", 501},       {"unavailable", 503},
      {"deadline_exceeded", 504}};
  const auto it = kStatus.find(code);
  return it == kStatus.end() ? 500 : it->second;
}

// The gateway's own error as Connect's.
ConnectError connect_error_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const ConnectError*>(&e))
    return *c;
  const ApiError api = api_error_of(e);
  std::string code = "internal";
  switch (api.status()) {
    case 400:
    case 413:
    case 422:
      code = "invalid_argument";
      break;
    case 401:
      code = "unauthenticated";
      break;
    case 403:
      code = "permission_denied";
      break;
    case 404:
    case 410:
      code = "not_found";
      break;
    case 409:
      code = "already_exists";
      break;
    case 429:
      code = "resource_exhausted";
      break;
    case 502:
    case 503:
      code = "unavailable";
      break;
    default:
      break;
  }
  return ConnectError(code, api.what());
}

json::object error_body(const ConnectError& e) {
  return json::object{{"code", e.code}, {"message", utf8_backslashreplace(e.what())}};
}

// One Connect envelope: a flags byte, the payload's length (4 bytes, big-endian), the payload.
void append_envelope(std::string& out, std::uint8_t flags, std::string_view payload) {
  out += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8)
    out += static_cast<char>((payload.size() >> shift) & 0xff);
  out += payload;
}

constexpr std::uint8_t kEndStream = 0x02;
constexpr std::size_t kMaxEnvelope = 4 << 20;  // a StartRequest is a few hundred bytes

// The one message of a client's enveloped request body (a server-streaming call's request).
json::object request_envelope(std::string_view body) {
  if (body.size() < 5)
    throw ConnectError("invalid_argument", "the request has no complete envelope");
  const auto flags = static_cast<std::uint8_t>(body[0]);
  std::size_t length = 0;
  for (int i = 1; i <= 4; ++i)
    length = (length << 8) | static_cast<std::uint8_t>(body[i]);
  if (flags != 0)
    throw ConnectError(
        "invalid_argument",
        fmt::format("envelope flags {:#04x}: expected an uncompressed message", flags));
  if (length > kMaxEnvelope)
    throw ConnectError("resource_exhausted", fmt::format("an envelope of {} bytes; the limit is {}",
                                                         length, kMaxEnvelope));
  if (length != body.size() - 5)
    throw ConnectError("invalid_argument",
                       fmt::format("the envelope says {} bytes and the body holds {} after it",
                                   length, body.size() - 5));
  boost::system::error_code ec;
  json::value v = json::parse(body.substr(5), ec);
  if (ec || !v.is_object())
    throw ConnectError("invalid_argument", "the envelope's message is not a JSON object");
  return std::move(v.as_object());
}

Answer stream_answer(std::string body) {
  Answer a;
  a.status = 200;
  a.content_type = "application/connect+json";
  a.body = std::move(body);
  return a;
}

// A Connect stream's last envelope: its end, with an error.
Answer stream_error(const ConnectError& e) {
  std::string body;
  append_envelope(body, kEndStream, json::serialize(json::object{{"error", error_body(e)}}));
  return stream_answer(std::move(body));
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

struct Call {
  Entry* entry = nullptr;
  std::shared_ptr<Live> live;
  Caller who;
};

// One line of `stat -c '%F|%s|%Y|%a|%A|%U|%G|%n'` as E2B's EntryInfo.
std::optional<json::object> entry_of(std::string_view line) {
  std::vector<std::string_view> f;
  for (int i = 0; i < 7; ++i) {
    const auto bar = line.find('|');
    if (bar == std::string_view::npos)
      return std::nullopt;
    f.push_back(line.substr(0, bar));
    line.remove_prefix(bar + 1);
  }
  const std::string path(line);
  std::string type = "FILE_TYPE_FILE";
  if (f[0] == "directory")
    type = "FILE_TYPE_DIRECTORY";
  else if (f[0] == "symbolic link")
    type = "FILE_TYPE_SYMLINK";
  unsigned long mode = 0;
  double mtime = 0;
  try {
    mode = std::stoul(std::string(f[3]), nullptr, 8);
    mtime = std::stod(std::string(f[2]));
  } catch (const std::exception&) {
  }
  const auto slash = path.rfind('/');
  return json::object{{"name", slash == std::string::npos ? path : path.substr(slash + 1)},
                      {"type", type},
                      {"path", path},
                      {"size", std::string(f[1])},  // int64: a string in proto3 JSON
                      {"mode", mode},
                      {"permissions", std::string(f[4])},
                      {"owner", std::string(f[5])},
                      {"group", std::string(f[6])},
                      {"modifiedTime", iso_time(mtime)}};
}

constexpr std::string_view kStat = "stat -c '%F|%s|%Y|%a|%A|%U|%G|%n' -- ";

struct Envd {
  std::shared_ptr<Gateway::Impl> s;

  Call admit(const Request& r) const {
    if (!s->reconciled)
      throw ConnectError("unavailable", "the gateway is reconciling its sessions; try again");
    const auto id = r.field("E2b-Sandbox-Id");
    if (!id || id->empty())
      throw ConnectError("invalid_argument", "the E2b-Sandbox-Id header is missing");
    const auto it = s->sessions.find(std::string(*id));
    if (it == s->sessions.end() || it->second.rec.state != state::ready)
      throw ConnectError("not_found", fmt::format("sandbox {} not found", *id));
    Entry& e = it->second;
    const auto token = r.field("X-Access-Token");
    if (!token || !server::same_token(*token, envd_access_token(e.rec)))
      throw ConnectError("unauthenticated",
                         fmt::format("a valid X-Access-Token for sandbox {} is required", *id));
    Call c;
    c.entry = &e;
    c.who.tenant = e.rec.tenant;
    c.who.actor = e.rec.tenant;
    c.who.request_id = request_id_of(r);
    s->touch(e);
    c.live = s->live_of(e);
    return c;
  }

  std::string path_of(const Call& c, std::string_view path) const {
    return s->resolve_path(*c.entry, path.empty() ? std::string_view(".") : path);
  }

  // Runs a shell script in the sandbox: its output, or the failure it printed.
  asio::awaitable<std::string> sh(const Call& c, std::string script) const {
    Command run;
    run.command = std::move(script);
    run.shell = true;
    run.timeout = 60;
    const CommandResponse seen = co_await c.live->runtime->execute(std::move(run));
    co_return seen.stdout_;
  }

  // EntryInfo of one path; not_found when it does not exist.
  asio::awaitable<json::object> stat(const Call& c, const std::string& path) const {
    const std::string out = co_await sh(
        c, fmt::format("[ -e {0} ] || [ -L {0} ] || {{ echo missing; exit 0; }}; {1}{0}",
                       shell_quote(path), kStat));
    if (out.starts_with("missing"))
      throw ConnectError("not_found", fmt::format("no such file or directory: {}", path));
    const auto entry = entry_of(out.substr(0, out.find('\n')));
    if (!entry)
      throw ConnectError("internal", fmt::format("cannot stat {}: {}", path, out));
    co_return *entry;
  }

  static json::object body_of(const Request& r) {
    const auto type = r.field("Content-Type").value_or("");
    if (!type.starts_with("application/json"))
      throw ConnectError("invalid_argument",
                         fmt::format("content type {:?}: expected application/json", type));
    return r.body.empty() ? json::object{} : parse_body(r.body);
  }

  // A string field, "" when absent (a wrong type is invalid_argument, through ApiError).
  static std::string text(const json::object& body, std::string_view key) {
    return string_field(body, key).value_or("");
  }

  asio::awaitable<json::object> filesystem(const Call& c, std::string_view method,
                                           const json::object& body) const {
    if (method == "Stat") {
      json::object entry = co_await stat(c, path_of(c, text(body, "path")));
      co_return json::object{{"entry", std::move(entry)}};
    }
    if (method == "ListDir") {
      const std::string path = path_of(c, text(body, "path"));
      std::int64_t depth = 1;
      if (const auto* d = body.if_contains("depth"); d != nullptr && d->is_number())
        depth = std::clamp<std::int64_t>(d->to_number<std::int64_t>(), 1, 64);
      const std::string out = co_await sh(
          c, fmt::format("[ -d {0} ] || {{ [ -e {0} ] && echo notdir || echo missing; exit 0; }}; "
                         "echo dir; find {0} -mindepth 1 -maxdepth {1} -exec {2}{{}} +",
                         shell_quote(path), depth, kStat));
      if (out.starts_with("missing"))
        throw ConnectError("not_found", fmt::format("no such directory: {}", path));
      if (out.starts_with("notdir"))
        throw ConnectError("invalid_argument", fmt::format("not a directory: {}", path));
      json::array entries;
      std::string_view rest(out);
      rest.remove_prefix(std::min(rest.size(), rest.find('\n') + 1));
      while (!rest.empty()) {
        const auto nl = rest.find('\n');
        if (auto e = entry_of(rest.substr(0, nl)))
          entries.push_back(std::move(*e));
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      }
      co_return json::object{{"entries", std::move(entries)}};
    }
    if (method == "MakeDir") {
      const std::string path = path_of(c, text(body, "path"));
      const std::string out = co_await sh(
          c,
          fmt::format("if [ -e {0} ]; then echo exists; else mkdir -p -- {0} 2>&1 && echo made; fi",
                      shell_quote(path)));
      if (out.starts_with("exists"))
        throw ConnectError("already_exists", fmt::format("{} exists already", path));
      if (out.find("made") == std::string::npos)
        throw ConnectError("internal", fmt::format("cannot make {}: {}", path, out));
      json::object entry = co_await stat(c, path);
      co_return json::object{{"entry", std::move(entry)}};
    }
    if (method == "Remove") {
      const std::string path = path_of(c, text(body, "path"));
      const std::string out = co_await sh(
          c, fmt::format("[ -e {0} ] || [ -L {0} ] || {{ echo missing; exit 0; }}; rm -rf -- {0} "
                         "2>&1 && echo removed",
                         shell_quote(path)));
      if (out.starts_with("missing"))
        throw ConnectError("not_found", fmt::format("no such file or directory: {}", path));
      if (out.find("removed") == std::string::npos)
        throw ConnectError("internal", fmt::format("cannot remove {}: {}", path, out));
      co_return json::object{};
    }
    if (method == "Move") {
      const std::string from = path_of(c, text(body, "source"));
      const std::string to = path_of(c, text(body, "destination"));
      const std::string out = co_await sh(
          c, fmt::format("[ -e {0} ] || [ -L {0} ] || {{ echo missing; exit 0; }}; "
                         "mkdir -p -- \"$(dirname -- {1})\" && mv -- {0} {1} 2>&1 && echo moved",
                         shell_quote(from), shell_quote(to)));
      if (out.starts_with("missing"))
        throw ConnectError("not_found", fmt::format("no such file or directory: {}", from));
      if (out.find("moved") == std::string::npos)
        throw ConnectError("internal", fmt::format("cannot move {} to {}: {}", from, to, out));
      json::object entry = co_await stat(c, to);
      co_return json::object{{"entry", std::move(entry)}};
    }
    throw ConnectError(
        "unimplemented",
        fmt::format("filesystem.Filesystem/{} is not served by this gateway", method));
  }

  // process.Process/Start: the command runs to its end in the sandbox; its answer is the whole
  // stream at once (start, its output, its end), so output arrives when the command ends.
  asio::awaitable<Answer> start(const Call& c, const Request& r, const json::object& message) {
    const auto* process = message.if_contains("process");
    if (process == nullptr || !process->is_object())
      throw ConnectError("invalid_argument", "process: required");
    const json::object& p = process->get_object();
    const std::string cmd = text(p, "cmd");
    if (cmd.empty())
      throw ConnectError("invalid_argument", "process.cmd: required");
    std::vector<std::string> argv;
    if (const auto* envs = p.if_contains("envs"); envs != nullptr && !envs->is_null()) {
      if (!envs->is_object())
        throw ConnectError("invalid_argument", "process.envs: expected an object");
      for (const auto& [k, v] : envs->get_object()) {
        if (!v.is_string() || k.empty() || k.find('=') != std::string_view::npos)
          throw ConnectError("invalid_argument", fmt::format("process.envs.{}: expected a string",
                                                             std::string_view(k)));
        if (argv.empty())
          argv.push_back("env");  // added to the sandbox's environment, not replacing it
        argv.push_back(fmt::format("{}={}", std::string_view(k), std::string_view(v.get_string())));
      }
    }
    argv.push_back(cmd);
    if (const auto* args = p.if_contains("args"); args != nullptr && !args->is_null()) {
      if (!args->is_array())
        throw ConnectError("invalid_argument", "process.args: expected an array");
      for (const auto& a : args->get_array()) {
        if (!a.is_string())
          throw ConnectError("invalid_argument", "process.args: expected strings");
        argv.emplace_back(a.get_string());
      }
    }
    Command run;
    run.command = argv;
    // A command's directory is not a file call's path: nothing confines what commands reach.
    const fs::path cwd(text(p, "cwd"));
    run.cwd = (cwd.empty()         ? fs::path(c.entry->rec.working_dir)
               : cwd.is_relative() ? fs::path(c.entry->rec.working_dir) / cwd
                                   : cwd)
                  .lexically_normal()
                  .string();
    run.timeout = 3600;
    if (const auto ms = r.field("Connect-Timeout-Ms")) {
      try {
        run.timeout = std::max(0.001, std::stod(std::string(*ms)) / 1000);
      } catch (const std::exception&) {
        throw ConnectError("invalid_argument", "Connect-Timeout-Ms: expected milliseconds");
      }
    }
    const std::uint64_t pid = ++s->e2b_processes;
    std::string body;
    append_envelope(body, 0,
                    json::serialize(json::object{
                        {"event", json::object{{"start", json::object{{"pid", pid}}}}}}));
    CommandResponse seen;
    std::optional<ConnectError> failure;
    try {
      seen = co_await c.live->runtime->execute(std::move(run));
    } catch (const CommandTimeoutError& e) {
      failure = ConnectError("deadline_exceeded", e.what());
    }
    s->append_log(c.entry->rec, c.who,
                  json::object{{"call", "e2b.process.Start"},
                               {"request", message},
                               {"exit_code", seen.exit_code ? json::value(*seen.exit_code)
                                                            : json::value(nullptr)}});
    if (failure) {
      append_envelope(body, kEndStream,
                      json::serialize(json::object{{"error", error_body(*failure)}}));
      co_return stream_answer(std::move(body));
    }
    for (const auto& [stream, data] :
         {std::pair<const char*, const std::string*>{"stdout", &seen.stdout_},
          {"stderr", &seen.stderr_}}) {
      if (data->empty())
        continue;
      append_envelope(
          body, 0,
          json::serialize(json::object{
              {"event", json::object{{"data", json::object{{stream, base64(*data)}}}}}}));
    }
    const int code = seen.exit_code.value_or(-1);
    append_envelope(
        body, 0,
        json::serialize(json::object{
            {"event", json::object{{"end", json::object{{"exitCode", code},
                                                        {"exited", true},
                                                        {"status", fmt::format("exit status {}",
                                                                               code)}}}}}}));
    append_envelope(body, kEndStream, "{}");
    co_return stream_answer(std::move(body));
  }

  asio::awaitable<std::variant<Answer, FileAnswer>> get_file(const Call& c, const Request& r) {
    const std::string path = path_of(c, r.query("path").value_or(""));
    const std::string out = co_await sh(
        c, fmt::format("if [ -d {0} ]; then echo dir; elif [ -e {0} ]; then echo file; else echo "
                       "missing; fi",
                       shell_quote(path)));
    if (out.starts_with("missing"))
      throw ConnectError("not_found", fmt::format("path {} does not exist", path));
    if (out.starts_with("dir"))
      throw ConnectError("invalid_argument", fmt::format("path {} is a directory", path));
    s->append_log(c.entry->rec, c.who, json::object{{"call", "e2b.files.read"}, {"path", path}});
    co_return co_await s->read_bytes(*c.live, path);
  }

  asio::awaitable<Answer> post_files(const Call& c, const Request& r) {
    const auto boundary = http::multipart_boundary(r.field("Content-Type").value_or(""));
    if (!boundary)
      throw ConnectError("invalid_argument", "expected a multipart/form-data body");
    struct Part {
      std::string filename;
      std::string data;
    };
    std::vector<Part> parts;
    bool in_file = false;
    http::MultipartParser::Handlers handlers;
    handlers.on_part_begin = [&](const http::MultipartPartHeaders& h) {
      in_file = h.name == "file";
      if (in_file)
        parts.push_back(Part{h.filename.value_or(""), {}});
    };
    handlers.on_part_data = [&](std::string_view data) {
      if (in_file)
        parts.back().data.append(data);
    };
    handlers.on_part_end = [] {};
    try {
      http::MultipartParser parser(*boundary, handlers);
      parser.feed(r.body);
      parser.finish();
    } catch (const http::MultipartError& x) {
      throw ConnectError("invalid_argument", x.what());
    }
    if (parts.empty())
      throw ConnectError("invalid_argument", "no part named \"file\"");
    const auto given = r.query("path");
    if (given && parts.size() != 1)
      throw ConnectError("invalid_argument", "?path= names one file, and the body has several");
    json::array written;
    for (auto& part : parts) {
      const std::string path = path_of(c, given ? std::string_view(*given) : part.filename);
      const std::size_t size = part.data.size();
      co_await s->write_bytes(*c.live, path, std::move(part.data), true);
      s->append_log(c.entry->rec, c.who,
                    json::object{{"call", "e2b.files.write"}, {"path", path}, {"size", size}});
      const auto slash = path.rfind('/');
      written.push_back(
          json::object{{"name", slash == std::string::npos ? path : path.substr(slash + 1)},
                       {"type", "file"},
                       {"path", path}});
    }
    co_return server::json_answer(200, written);
  }
};

// The HTTP endpoints answer errors as {"code": status, "message"}.
Answer http_error(const ConnectError& e) {
  const unsigned status = connect_status(e.code);
  return server::json_answer(
      status, json::object{{"code", status}, {"message", utf8_backslashreplace(e.what())}});
}

// An HTTP endpoint of the in-sandbox API: the caller admitted, then `handle`; a failure as
// {"code": status, "message"}.
template <class T, class Handle>
asio::awaitable<T> envd_http(std::shared_ptr<Gateway::Impl> s, Request r, Handle handle) {
  Envd envd{s};
  std::optional<ConnectError> failure;
  try {
    const Call c = envd.admit(r);
    co_return co_await handle(envd, c, r);
  } catch (const std::exception& e) {
    failure = connect_error_of(e);
  }
  co_return http_error(*failure);
}

}  // namespace

void add_e2b_envd_routes(server::RouteTable& t, std::shared_ptr<Gateway::Impl> s) {
  using bhttp::verb;
  t.add(verb::get, "/health", server::JsonRoute([](Request) -> asio::awaitable<Answer> {
          Answer a;
          a.status = 204;
          co_return a;
        }));
  t.add(verb::get, "/files",
        server::FileRoute([s](Request r) -> asio::awaitable<std::variant<Answer, FileAnswer>> {
          return envd_http<std::variant<Answer, FileAnswer>>(
              s, std::move(r),
              [](Envd& envd, const Call& c, const Request& req) { return envd.get_file(c, req); });
        }));
  t.add(verb::post, "/files", server::JsonRoute([s](Request r) -> asio::awaitable<Answer> {
          return envd_http<Answer>(s, std::move(r),
                                   [](Envd& envd, const Call& c, const Request& req) {
                                     return envd.post_files(c, req);
                                   });
        }));
  t.add(verb::post, "/filesystem.Filesystem/{method}",
        server::JsonRoute([s](Request r) -> asio::awaitable<Answer> {
          Envd envd{s};
          std::optional<ConnectError> failure;
          try {
            const Call c = envd.admit(r);
            const json::object body = Envd::body_of(r);
            const std::string method(r.param("method"));
            json::object reply = co_await envd.filesystem(c, method, body);
            s->append_log(c.entry->rec, c.who,
                          json::object{{"call", "e2b.filesystem." + method}, {"request", body}});
            co_return server::json_answer(200, reply);
          } catch (const std::exception& e) {
            failure = connect_error_of(e);
          }
          const unsigned status = connect_status(failure->code);
          co_return server::json_answer(status, error_body(*failure));
        }));
  t.add(verb::post, "/process.Process/{method}",
        server::JsonRoute([s](Request r) -> asio::awaitable<Answer> {
          Envd envd{s};
          const bool streaming =
              r.field("Content-Type").value_or("").starts_with("application/connect+");
          std::optional<ConnectError> failure;
          try {
            const std::string method(r.param("method"));
            if (method == "Start" && streaming) {
              const json::object message = request_envelope(r.body);
              const Call c = envd.admit(r);
              co_return co_await envd.start(c, r, message);
            }
            // A command has ended before its Start answers: no process is ever running to be
            // listed, signalled, fed or reconnected to.
            const bool unary = method == "List" || method == "SendSignal" ||
                               method == "SendInput" || method == "CloseStdin" ||
                               method == "Update";
            if ((unary && !streaming) || (method == "Connect" && streaming)) {
              const json::object message = streaming ? request_envelope(r.body) : Envd::body_of(r);
              (void)envd.admit(r);
              if (method == "List")
                co_return server::json_answer(200, json::object{{"processes", json::array{}}});
              std::string which = "the process";
              if (const auto* sel = message.if_contains("process"); sel && sel->is_object()) {
                if (const auto* pid = sel->get_object().if_contains("pid"))
                  which = "process " + json::serialize(*pid);
                else if (const auto* tag = sel->get_object().if_contains("tag"))
                  which = "the process tagged " + json::serialize(*tag);
              }
              throw ConnectError("not_found",
                                 fmt::format("{} is not running: a command runs to its end "
                                             "before its answer here",
                                             which));
            }
            (void)envd.admit(r);
            throw ConnectError(
                "unimplemented",
                fmt::format("process.Process/{} is not served by this gateway", method));
          } catch (const std::exception& e) {
            failure = connect_error_of(e);
          }
          if (streaming)
            co_return stream_error(*failure);
          co_return server::json_answer(connect_status(failure->code), error_body(*failure));
        }));
}

}  // namespace rex::gateway
