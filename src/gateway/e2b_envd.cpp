// The E2B-compatible in-sandbox API: what E2B's SDKs send to E2B_SANDBOX_URL (E2B's in-sandbox
// daemon, "envd"), served by the gateway on its own listener. A request names its sandbox in
// the E2b-Sandbox-Id header and proves itself with X-Access-Token, the envdAccessToken the
// control API gave for that sandbox; it then counts as activity of that session.
//
// Served: GET /health; GET /files (a file's bytes) and POST /files (multipart, one or several
// files); filesystem.Filesystem's Stat, ListDir, MakeDir, Remove and Move in the Connect
// protocol with the JSON codec; process.Process's Start and Connect (server streams: the
// process's output as it comes, in Connect's envelopes), List, SendSignal, SendInput and
// CloseStdin, over the background processes of the sandbox's server (rex/protocol/processes.hpp),
// so a process outlives the call that started it and the gateway itself. Paths are the
// sandbox's; a relative one is relative to the session's working directory, and the local
// provider keeps them inside it, as the gateway's own file calls do. Other ports of the sandbox
// than envd's: e2b_ports.cpp.
#include <rex/core/random.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/server/admission.hpp>
#include <rex/server/event_stream.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
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
  // The sandbox's answers to process calls, by what they mean.
  if (dynamic_cast<const ProcessDoesNotExistError*>(&e) != nullptr)
    return ConnectError("not_found", e.what());
  if (dynamic_cast<const ValueError*>(&e) != nullptr)
    return ConnectError("invalid_argument", e.what());
  if (dynamic_cast<const FileNotFoundError*>(&e) != nullptr ||
      dynamic_cast<const PermissionError*>(&e) != nullptr ||
      dynamic_cast<const NotADirectoryError*>(&e) != nullptr)
    return ConnectError("invalid_argument", e.what());
  if (dynamic_cast<const ProcessesUnsupportedError*>(&e) != nullptr)
    return ConnectError("unimplemented", e.what());
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

// A unary call's failure: the error as its body, with the status of its code.
Answer unary_error(const ConnectError& e) {
  return server::json_answer(connect_status(e.code), error_body(e));
}

// One Connect envelope: a flags byte, the payload's length (4 bytes, big-endian), the payload.
std::string envelope(std::uint8_t flags, const json::value& message) {
  const std::string payload = json::serialize(message);
  std::string out;
  out += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8)
    out += static_cast<char>((payload.size() >> shift) & 0xff);
  out += payload;
  return out;
}

constexpr std::uint8_t kEndStream = 0x02;

// A Connect stream's last envelope: its end, with the error when the call failed.
std::string end_of_stream(const ConnectError* failure) {
  if (failure == nullptr)
    return envelope(kEndStream, json::object{});
  return envelope(kEndStream, json::object{{"error", error_body(*failure)}});
}
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

// A stream refused at once: only its last envelope, with the error.
Answer stream_error(const ConnectError& e) {
  return stream_answer(end_of_stream(&e));
}

struct Call {
  Entry* entry = nullptr;
  std::shared_ptr<Live> live;
  Caller who;
  std::string user;  // who the call asks to act as (E2B's Basic user); empty: the default
};

// The user of E2B's `Authorization: Basic base64(user:)`; empty without one.
std::string basic_user(const Request& r) {
  const auto header = r.field("Authorization");
  constexpr std::string_view kBasic = "Basic ";
  if (!header || !header->starts_with(kBasic))
    return {};
  const Base64Decoded decoded = base64_decode(header->substr(kBasic.size()));
  if (!decoded.error.empty())
    throw ConnectError("invalid_argument", "Authorization: not valid base64");
  std::string user = decoded.bytes.substr(0, decoded.bytes.find(':'));
  const bool plain = std::all_of(user.begin(), user.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.';
  });
  if (!plain || user.size() > 32)
    throw ConnectError("invalid_argument", "Authorization: the user is not a valid user name");
  return user;
}

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
    Entry* found = s->sessions.find(*id);
    if (found == nullptr || found->rec.state != state::ready)
      throw ConnectError("not_found", fmt::format("sandbox {} not found", *id));
    if (!found->rec.paused.empty())
      throw ConnectError("unavailable",
                         fmt::format("sandbox {} is paused: connect to it to resume it", *id));
    Entry& e = *found;
    const auto token = r.field("X-Access-Token");
    if (!token || !server::same_token(*token, envd_access_token(e.rec)))
      throw ConnectError("unauthenticated",
                         fmt::format("a valid X-Access-Token for sandbox {} is required", *id));
    Call c;
    c.entry = &e;
    c.user = basic_user(r);
    c.who.tenant = e.rec.tenant;
    c.who.actor = e.rec.tenant;
    c.who.request_id = request_id_of(r);
    c.who.since = unix_now();
    s->touch(e, fmt::format("e2b{}", r.path()));
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

  // A StartRequest as the sandbox's process: E2B's cmd and args, its envs added to the
  // sandbox's environment, its cwd (relative to the session's working directory), its tag, and
  // stdin as a pipe when asked.
  ProcessConfig process_config(const Call& c, const json::object& message) const {
    const auto* process = message.if_contains("process");
    if (process == nullptr || !process->is_object())
      throw ConnectError("invalid_argument", "process: required");
    const json::object& p = process->get_object();
    ProcessConfig config;
    const std::string cmd = text(p, "cmd");
    if (cmd.empty())
      throw ConnectError("invalid_argument", "process.cmd: required");
    config.argv.push_back(cmd);
    if (const auto* args = p.if_contains("args"); args != nullptr && !args->is_null()) {
      if (!args->is_array())
        throw ConnectError("invalid_argument", "process.args: expected an array");
      for (const auto& a : args->get_array()) {
        if (!a.is_string())
          throw ConnectError("invalid_argument", "process.args: expected strings");
        config.argv.emplace_back(a.get_string());
      }
    }
    if (const auto* envs = p.if_contains("envs"); envs != nullptr && !envs->is_null()) {
      if (!envs->is_object())
        throw ConnectError("invalid_argument", "process.envs: expected an object");
      std::map<std::string, std::string> added;
      for (const auto& [k, v] : envs->get_object()) {
        if (!v.is_string() || k.empty() || k.find('=') != std::string_view::npos)
          throw ConnectError("invalid_argument", fmt::format("process.envs.{}: expected a string",
                                                             std::string_view(k)));
        added[std::string(k)] = std::string(v.get_string());
      }
      config.env = std::move(added);
    }
    // A command's directory is not a file call's path: nothing confines what commands reach.
    const fs::path cwd(text(p, "cwd"));
    config.cwd = (cwd.empty()         ? fs::path(c.entry->rec.working_dir)
                  : cwd.is_relative() ? fs::path(c.entry->rec.working_dir) / cwd
                                      : cwd)
                     .lexically_normal()
                     .string();
    // As the user the call names, else the environment's (a template's last USER). A
    // container's server runs as root and switches; a local sandbox has no accounts to switch
    // to, and runs every command as the gateway's user.
    std::string user = c.user;
    if (user.empty()) {
      if (const Environment* env = s->find_environment(c.entry->rec.environment))
        user = env->user;
    }
    const std::string& provider = c.entry->rec.provider;
    if (!user.empty() && user != "root" && provider != "local") {
      std::vector<std::string> argv{"runuser", "-u", user, "--"};
      argv.insert(argv.end(), config.argv.begin(), config.argv.end());
      config.argv = std::move(argv);
    }
    config.tag = text(message, "tag");
    if (const auto* in = message.if_contains("stdin"); in != nullptr && in->is_bool())
      config.stdin_pipe = in->get_bool();
    if (const auto* pty = message.if_contains("pty"); pty != nullptr && !pty->is_null())
      throw ConnectError("unimplemented", "a process in a pseudo-terminal (pty) is not served");
    return config;
  }

  // The process a call selects: {"process": {"pid": N}} or {"process": {"tag": "T"}}.
  static ProcessSelector selector_of(const json::object& message) {
    ProcessSelector which;
    const auto* sel = message.if_contains("process");
    if (sel != nullptr && sel->is_object()) {
      const json::object& o = sel->get_object();
      if (const auto* pid = o.if_contains("pid"); pid != nullptr && pid->is_number())
        which.pid = pid->to_number<long>();
      else if (const auto* tag = o.if_contains("tag"); tag != nullptr && tag->is_string())
        which.tag = std::string(tag->get_string());
    }
    if (which.pid <= 0 && which.tag.empty())
      throw ConnectError("invalid_argument", "process: a pid or a tag is required");
    return which;
  }

  // The unary process calls: List, SendSignal, SendInput, CloseStdin.
  asio::awaitable<json::object> process_call(const Call& c, std::string_view method,
                                             const json::object& message) const {
    Runtime& runtime = *c.live->runtime;
    if (method == "List") {
      const ProcessListResponse listed = co_await runtime.list_processes();
      json::array processes;
      for (const auto& p : listed.processes) {
        json::array args;
        for (std::size_t i = 1; i < p.argv.size(); ++i)
          args.emplace_back(p.argv[i]);
        json::object envs;
        if (p.env)
          for (const auto& [k, v] : *p.env)
            envs[k] = v;
        json::object info{
            {"config", json::object{{"cmd", p.argv.empty() ? std::string() : p.argv.front()},
                                    {"args", std::move(args)},
                                    {"envs", std::move(envs)},
                                    {"cwd", p.cwd}}},
            {"pid", p.pid}};
        if (!p.tag.empty())
          info["tag"] = p.tag;
        processes.push_back(std::move(info));
      }
      co_return json::object{{"processes", std::move(processes)}};
    }
    const ProcessSelector which = selector_of(message);
    if (method == "SendSignal") {
      ProcessSignal signal{.pid = which.pid, .tag = which.tag, .signal = "SIGKILL"};
      if (const auto* v = message.if_contains("signal")) {
        if (v->is_string() && v->get_string().starts_with("SIGNAL_"))
          signal.signal = std::string(v->get_string().subview(7));
        else if (v->is_number())
          signal.signal = std::to_string(v->to_number<int>());
        else
          throw ConnectError("invalid_argument",
                             "signal: expected SIGNAL_SIGTERM or SIGNAL_SIGKILL");
      }
      if (signal.signal == "UNSPECIFIED" || signal.signal == "0")
        throw ConnectError("invalid_argument", "signal: unspecified");
      co_await runtime.signal_process(std::move(signal));
      co_return json::object{};
    }
    if (method == "SendInput" || method == "CloseStdin") {
      ProcessInput input{.pid = which.pid, .tag = which.tag, .data = {}, .close = false};
      if (method == "CloseStdin") {
        input.close = true;
      } else {
        const auto* in = message.if_contains("input");
        const json::object* o = in != nullptr ? in->if_object() : nullptr;
        if (o != nullptr && o->contains("pty"))
          throw ConnectError("unimplemented", "input to a pseudo-terminal (pty) is not served");
        const json::value* stdin_data = o != nullptr ? o->if_contains("stdin") : nullptr;
        if (stdin_data == nullptr || !stdin_data->is_string())
          throw ConnectError("invalid_argument", "input.stdin: expected base64 bytes");
        Base64Decoded bytes = base64_decode(stdin_data->get_string());
        if (!bytes.error.empty())
          throw ConnectError("invalid_argument", "input.stdin: " + bytes.error);
        input.data = std::move(bytes.bytes);
      }
      co_await runtime.send_process_input(std::move(input));
      co_return json::object{};
    }
    throw ConnectError("unimplemented",
                       fmt::format("process.Process/{} is not served by this gateway", method));
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
    std::string owned;  // the files written, for their owner
    for (auto& part : parts) {
      const std::string path = path_of(c, given ? std::string_view(*given) : part.filename);
      owned += " " + shell_quote(path);
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
    // Owned by the user the call names (?username= or its Basic user), else the environment's;
    // a container's server writes as root. A local sandbox has no accounts to give them to.
    std::string user = c.user;
    if (const auto named = r.query("username"); user.empty() && named)
      user = std::string(*named);
    if (user.empty()) {
      if (const Environment* env = s->find_environment(c.entry->rec.environment))
        user = env->user;
    }
    if (!user.empty() && user != "root" && c.entry->rec.provider != "local") {
      auto owning = sh(c, fmt::format("chown {}:{}{} 2>&1 || chown {}{} 2>&1", shell_quote(user),
                                      shell_quote(user), owned, shell_quote(user), owned));
      co_await std::move(owning);
    }
    co_return server::json_answer(200, written);
  }
};

// --- process streams ---------------------------------------------------------------------------

json::object process_event(const ProcessEvent& e) {
  switch (e.kind) {
    case ProcessEvent::Kind::started:
      return json::object{{"event", json::object{{"start", json::object{{"pid", e.pid}}}}}};
    case ProcessEvent::Kind::stdout_data:
      return json::object{
          {"event", json::object{{"data", json::object{{"stdout", base64_encode(e.data)}}}}}};
    case ProcessEvent::Kind::stderr_data:
      return json::object{
          {"event", json::object{{"data", json::object{{"stderr", base64_encode(e.data)}}}}}};
    case ProcessEvent::Kind::keepalive:
      break;
  }
  return json::object{{"event", json::object{{"keepalive", json::object{}}}}};
}

json::object end_event(const ProcessEnd& end) {
  json::object e{{"exitCode", end.exit_code.value_or(-1)},
                 {"exited", end.exit_code.has_value()},
                 {"status", end.status}};
  if (!end.exit_code)
    e["error"] = end.status;  // "signal: killed": what the SDKs' exit error reports
  return json::object{{"event", json::object{{"end", std::move(e)}}}};
}

// What a process stream follows: a process to start (killed when the call's deadline passes)
// or a running one to connect to (left running then).
struct Followed {
  std::variant<ProcessConfig, ProcessSelector> what;
  std::optional<double> timeout;  // Connect-Timeout-Ms
  json::object request;           // for the transcript
  std::string call;
};

// The run, within `timeout` when there is one: none when the deadline passed first.
asio::awaitable<std::optional<std::optional<ProcessEnd>>> bounded(
    asio::awaitable<std::optional<ProcessEnd>> run, std::optional<double> timeout) {
  if (!timeout)
    co_return co_await std::move(run);
  auto limited = with_timeout(std::move(run), duration_from_seconds(*timeout));
  co_return co_await std::move(limited);
}

// Streams a process's events to the client as Connect envelopes, as they come: start, data,
// keepalives, end, then the end of the stream (with an error when the call failed).
asio::awaitable<void> follow_process(std::shared_ptr<Gateway::Impl> s, SessionRecord rec,
                                     std::shared_ptr<Live> live, Caller who, Followed f,
                                     std::shared_ptr<server::EventStream> out) {
  Runtime& runtime = *live->runtime;
  auto pid = std::make_shared<long>(0);
  Runtime::ProcessListener listener = [out, pid](const ProcessEvent& e) {
    if (out->closed())
      return false;  // the client left: the process runs on
    if (e.kind == ProcessEvent::Kind::started)
      *pid = e.pid;
    out->send_bytes(envelope(0, process_event(e)));
    return true;
  };
  std::optional<ProcessEnd> end;
  std::optional<ConnectError> failure;
  bool timed_out = false;
  try {
    auto run = std::holds_alternative<ProcessConfig>(f.what)
                   ? runtime.start_process(std::get<ProcessConfig>(f.what), listener)
                   : runtime.connect_process(std::get<ProcessSelector>(f.what), listener);
    auto limited = bounded(std::move(run), f.timeout);
    auto result = co_await std::move(limited);
    timed_out = !result;
    if (result)
      end = std::move(*result);
  } catch (const std::exception& e) {
    failure = connect_error_of(e);
  }
  if (timed_out) {
    failure = ConnectError("deadline_exceeded",
                           fmt::format("the call's deadline of {} passed",
                                       seconds_text(std::chrono::duration<double>(*f.timeout))));
    if (std::holds_alternative<ProcessConfig>(f.what) && *pid > 0) {
      ProcessSignal kill{.pid = *pid, .tag = {}, .signal = "SIGKILL"};
      try {
        co_await runtime.signal_process(std::move(kill));
      } catch (const std::exception&) {
        // it has ended meanwhile
      }
    }
  }
  json::object line{{"call", std::move(f.call)}, {"request", std::move(f.request)}};
  if (*pid > 0)
    line["pid"] = *pid;
  if (end) {
    line["exit_code"] = end->exit_code ? json::value(*end->exit_code) : json::value(nullptr);
    line["status"] = end->status;
    out->send_bytes(envelope(0, end_event(*end)));
    out->send_bytes(end_of_stream(nullptr));
  } else if (failure) {
    line["error"] = failure->code;
    out->send_bytes(end_of_stream(&*failure));
  } else {
    line["detached"] = true;  // the client left before the process ended
  }
  s->append_log(rec, who, std::move(line));
}

// A header's number; none when absent, invalid_argument naming it when it is not a number.
std::optional<double> header_number(const Request& r, std::string_view name,
                                    std::string_view unit) {
  const auto v = r.field(name);
  if (!v)
    return std::nullopt;
  try {
    return std::stod(std::string(*v));
  } catch (const std::exception&) {
    throw ConnectError("invalid_argument", fmt::format("{}: expected {}", name, unit));
  }
}

// process.Process/Start and /Connect: the request checked and its caller admitted at once (a
// refusal is a Connect error), then the stream.
std::variant<Answer, server::EventProducer> process_stream(std::shared_ptr<Gateway::Impl> s,
                                                           const Request& r, bool start) {
  const bool streaming = r.field("Content-Type").value_or("").starts_with("application/connect+");
  std::optional<ConnectError> failure;
  try {
    if (!streaming)
      throw ConnectError("invalid_argument",
                         fmt::format("process.Process/{} is a server-streaming call: send "
                                     "application/connect+json",
                                     start ? "Start" : "Connect"));
    const json::object message = request_envelope(r.body);
    Envd envd{s};
    const Call c = envd.admit(r);
    Followed f;
    if (start)
      f.what = envd.process_config(c, message);
    else
      f.what = Envd::selector_of(message);
    if (const auto ms = header_number(r, "Connect-Timeout-Ms", "milliseconds"); ms && *ms > 0)
      f.timeout = *ms / 1000;
    const double keepalive = header_number(r, "Keepalive-Ping-Interval", "seconds").value_or(50);
    if (auto* config = std::get_if<ProcessConfig>(&f.what))
      config->keepalive = keepalive;
    else
      std::get<ProcessSelector>(f.what).keepalive = keepalive;
    f.request = message;
    f.call = start ? "e2b.process.Start" : "e2b.process.Connect";
    return server::EventProducer(
        [s, rec = c.entry->rec, live = c.live, who = c.who,
         f = std::move(f)](std::shared_ptr<server::EventStream> out) mutable {
          return follow_process(s, rec, live, who, std::move(f), std::move(out));
        });
  } catch (const std::exception& e) {
    failure = connect_error_of(e);
  }
  if (streaming)
    return stream_error(*failure);
  return unary_error(*failure);
}

// The HTTP endpoints answer errors as {"code": status, "message"}.
Answer http_error(const ConnectError& e) {
  return e2b_error(connect_status(e.code), e.what());
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
          co_return unary_error(*failure);
        }));
  // The two server-streaming calls first: the route of the unary ones would take them.
  t.add(verb::post, "/process.Process/Start",
        server::StreamRoute([s](Request r) { return process_stream(s, r, true); }),
        "application/connect+json");
  t.add(verb::post, "/process.Process/Connect",
        server::StreamRoute([s](Request r) { return process_stream(s, r, false); }),
        "application/connect+json");
  t.add(verb::post, "/process.Process/{method}",
        server::JsonRoute([s](Request r) -> asio::awaitable<Answer> {
          Envd envd{s};
          const std::string method(r.param("method"));
          std::optional<Call> c;
          json::object body;
          std::optional<ConnectError> failure;
          try {
            body = Envd::body_of(r);
            c = envd.admit(r);
            json::object reply = co_await envd.process_call(*c, method, body);
            s->append_log(c->entry->rec, c->who,
                          json::object{{"call", "e2b.process." + method}, {"request", body}});
            co_return server::json_answer(200, reply);
          } catch (const std::exception& e) {
            failure = connect_error_of(e);
          }
          if (c)  // admitted: the refusal is the session's too
            s->append_log(c->entry->rec, c->who,
                          json::object{{"call", "e2b.process." + method},
                                       {"request", std::move(body)},
                                       {"error", failure->code}});
          co_return unary_error(*failure);
        }));
}

}  // namespace rex::gateway
