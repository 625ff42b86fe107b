#include <rex/gateway/local_provider.hpp>

#include <rex/core/random.hpp>
#include <rex/http/url.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "core/spawn.hpp"
#include "gateway/session_record.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace rex::gateway {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// Session ids are 17 characters; a little room is left.
constexpr std::size_t kMaxIdLength = 24;
constexpr std::string_view kSocketName = "server.sock";

// A sandbox id names a directory under the root: one plain path component.
bool valid_sandbox_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdLength || id == "." || id == "..")
    return false;
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok)
      return false;
  }
  return true;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The last lines of a server's log, for a failed start's message.
std::string log_tail(const fs::path& file) {
  std::string text = read_text(file);
  constexpr std::size_t kTail = 2000;
  if (text.size() > kTail)
    text = "..." + text.substr(text.size() - kTail);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text.empty() ? "(no output)" : text;
}

// Whether a process we started has ended (absent, or a zombie). Its command line is not looked
// at: while it execs (a sanitizer runtime may exec again) that can read empty for a moment.
bool process_gone(pid_t pid) {
  const std::string stat = read_text(fmt::format("/proc/{}/stat", pid));
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z' ||
         stat[close + 2] == 'X';
}

// Whether `pid` is a live process whose command line names `marker` (the sandbox's socket):
// a pid reused by something else after the server ended is not ours.
bool our_process(pid_t pid, const std::string& marker) {
  if (pid <= 0 || process_gone(pid))
    return false;
  return read_text(fmt::format("/proc/{}/cmdline", pid)).find(marker) != std::string::npos;
}

struct SandboxFile {
  std::string gateway_id;
  std::string session_id;
  double created_at = 0;
  pid_t pid = 0;
};

std::optional<SandboxFile> read_sandbox_file(const fs::path& dir) {
  boost::system::error_code ec;
  const json::value v = json::parse(read_text(dir / "sandbox.json"), ec);
  if (ec || !v.is_object())
    return std::nullopt;
  const auto& o = v.get_object();
  SandboxFile f;
  try {
    f.gateway_id = json::value_to<std::string>(o.at("gateway_id"));
    f.session_id = json::value_to<std::string>(o.at("session_id"));
    f.created_at = o.at("created_at").to_number<double>();
    f.pid = static_cast<pid_t>(o.at("pid").to_number<std::int64_t>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return f;
}

void write_sandbox_file(const fs::path& dir, const SandboxFile& f) {
  const json::object o{{"gateway_id", f.gateway_id},
                       {"session_id", f.session_id},
                       {"created_at", f.created_at},
                       {"pid", f.pid}};
  const fs::path temp = dir / "sandbox.json.new";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << json::serialize(o);
    out.flush();
    if (!out)
      throw ProviderError(fmt::format("cannot write {}", temp.string()));
  }
  fs::rename(temp, dir / "sandbox.json");
}

// Starts the server as a grandchild in a session of its own, so that it is not the gateway's
// child (nothing for the gateway to reap) and lives on when the gateway dies. Everything the
// child needs is prepared before fork: after it only async-signal-safe calls run.
pid_t start_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     const std::string& cwd, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // `report` carries the server's pid from the middle process; `exec_done` ends (close-on-exec)
  // when the server has exec'd, or carries the errno of a failed exec.
  int report[2];
  int exec_done[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    throw ProviderError(fmt::format("pipe: {}", std::strerror(errno)));
  if (::pipe2(exec_done, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    throw ProviderError(fmt::format("pipe: {}", std::strerror(err)));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    const int err = errno;
    for (const int fd : {report[0], report[1], exec_done[0], exec_done[1]})
      ::close(fd);
    throw ProviderError(fmt::format("fork: {}", std::strerror(err)));
  }
  if (child == 0) {
    ::setsid();
    const pid_t server = ::fork();
    if (server != 0) {
      // The middle process reports the server's pid (or -1) and leaves at once.
      const pid_t value = server > 0 ? server : -1;
      [[maybe_unused]] const auto n = ::write(report[1], &value, sizeof value);
      ::_exit(0);
    }
    ::setpgid(0, 0);  // a process group of its own, named by its pid
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0 || ::chdir(cwd.c_str()) != 0)
      ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // Nothing of the gateway's (its listener, connections, database) goes into the sandbox:
    // descriptors Asio opened are not all close-on-exec.
    // exec_done's write end stays until exec closes it.
    const auto keep = static_cast<unsigned>(exec_done[1]);
    if (keep > 3)
      ::close_range(3, keep - 1, 0);
    ::close_range(keep + 1, ~0U, 0);
    ::execve(argv[0], argv.data(), envp.data());
    const int err = errno;  // exec failed: the parent learns why
    [[maybe_unused]] const auto w = ::write(exec_done[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(report[1]);
  ::close(exec_done[1]);
  pid_t server = -1;
  ssize_t n;
  do {
    n = ::read(report[0], &server, sizeof server);
  } while (n < 0 && errno == EINTR);
  // The pipe ends (close-on-exec) when the server has exec'd; before that its /proc entry is
  // still the gateway's copy. An errno arrives instead when exec failed.
  int exec_error = 0;
  ssize_t m;
  do {
    m = ::read(exec_done[0], &exec_error, sizeof exec_error);
  } while (m < 0 && errno == EINTR);
  ::close(report[0]);
  ::close(exec_done[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof server) || server <= 0)
    throw ProviderError("could not start the sandbox's server process (fork failed)");
  if (m == static_cast<ssize_t>(sizeof exec_error))
    throw ProviderError(fmt::format("cannot run {}: {}", args.front(), std::strerror(exec_error)));
  return server;
}

// A failure as a ProviderError (which it may already be).
[[noreturn]] void rethrow_as_provider_error(std::exception_ptr failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const ProviderError&) {
    throw;
  } catch (const std::exception& e) {
    throw ProviderError(fmt::format("cannot start a local sandbox: {}", e.what()));
  }
}

asio::awaitable<void> pause(std::chrono::microseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(d);
  co_await timer.async_wait(asio::use_awaitable);
}

}  // namespace

struct LocalProvider::Impl {
  asio::any_io_executor ex;
  LocalProviderConfig cfg;

  fs::path dir_of(const std::string& id) const { return cfg.root / id; }
  std::string socket_of(const std::string& id) const { return (dir_of(id) / kSocketName).string(); }

  // Ends the server of a sandbox directory: SIGTERM (its sessions close), then SIGKILL after
  // the grace period. Returns when the process is gone.
  asio::awaitable<void> end_server(const fs::path& dir, const std::string& socket) {
    const auto file = read_sandbox_file(dir);
    if (!file || !our_process(file->pid, socket))
      co_return;
    ::kill(file->pid, SIGTERM);
    const auto give_up = std::chrono::steady_clock::now() + cfg.stop_grace;
    while (our_process(file->pid, socket)) {
      if (std::chrono::steady_clock::now() >= give_up) {
        spdlog::warn("gateway: sandbox server {} did not end on SIGTERM; killing it", file->pid);
        ::kill(-file->pid, SIGKILL);
        ::kill(file->pid, SIGKILL);
      }
      co_await pause(10ms);
    }
  }

  void remove_dir(const fs::path& dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec)
      throw ProviderError(fmt::format("cannot remove {}: {}", dir.string(), ec.message()));
  }
};

LocalProvider::LocalProvider(asio::any_io_executor executor, LocalProviderConfig config)
    : impl_(std::make_unique<Impl>(Impl{std::move(executor), std::move(config)})) {
  std::error_code ec;
  fs::create_directories(impl_->cfg.root, ec);
  if (ec)
    throw ProviderError(
        fmt::format("cannot create {}: {}", impl_->cfg.root.string(), ec.message()));
  impl_->cfg.root = fs::absolute(impl_->cfg.root).lexically_normal();
  // The longest socket path a session id can make must fit a sockaddr_un.
  const std::size_t room = sizeof(sockaddr_un{}.sun_path) - 1;  // its NUL
  // The longest is the notebook kernel's socket while it is bound aside (notebook_kernel.py).
  const std::size_t tail = 1 + kMaxIdLength + std::string_view("/notebook/kernel.sock.new").size();
  const std::string root = impl_->cfg.root.string();
  if (root.size() + tail > room)
    throw ProviderError(fmt::format(
        "the storage folder's sandboxes/ ({}, {} bytes) is too long for the local sandboxes' "
        "unix sockets: it may have {} bytes at most; choose a shorter --storage path",
        root, root.size(), room - tail));
}

LocalProvider::~LocalProvider() = default;

asio::awaitable<SandboxAddress> LocalProvider::create(SandboxSpec spec) {
  Impl& s = *impl_;
  const std::string& id = spec.session_id;
  if (!valid_sandbox_id(id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", id));
  const fs::path dir = s.dir_of(id);
  std::error_code ec;
  if (!fs::create_directory(dir, ec))
    throw ProviderError(
        fmt::format("cannot create {}: {}", dir.string(), ec ? ec.message() : "it exists already"));
  ::chmod(dir.c_str(), 0700);
  SandboxAddress address;
  address.sandbox_id = id;
  address.token = random_hex(16);
  const std::string socket = s.socket_of(id);
  address.url = http::unix_socket_url(socket);
  const fs::path work =
      spec.environment.working_dir.empty() ? dir / "work" : fs::path(spec.environment.working_dir);
  address.working_dir = work.string();
  address.scratch_dir = (dir / "notebook").string();

  std::exception_ptr failure;
  try {
    fs::create_directories(work);
    std::vector<std::string> args = s.cfg.server_command;
    for (const char* a : {"--unix-socket", socket.c_str(), "--auth-token", address.token.c_str(),
                          "--log-level", "warn"})
      args.emplace_back(a);
    if (spec.max_lifetime > 0) {
      args.emplace_back("--max-lifetime");
      args.push_back(fmt::format("{}", spec.max_lifetime));
    }
    std::map<std::string, std::string> env_map = detail::current_environment();
    for (const auto& [k, v] : spec.env)
      env_map[k] = v;
    env_map["REX_SANDBOX"] = id;
    const std::vector<std::string> env = detail::environment_entries(env_map);

    SandboxFile file{s.cfg.gateway_id, id, unix_now(), 0};
    write_sandbox_file(dir, file);  // before the process: a crash between leaves a record
    file.pid = start_detached(args, env, work.string(), (dir / "server.log").string());
    write_sandbox_file(dir, file);

    RemoteRuntimeConfig rc;
    rc.url = address.url;
    rc.auth_token = address.token;
    rc.is_alive_timeout = 1s;
    RemoteRuntime runtime(s.ex, rc);
    const auto give_up = std::chrono::steady_clock::now() + s.cfg.startup_timeout;
    // The server listens about a millisecond after its start: the first checks come soon.
    std::chrono::microseconds delay = 200us;
    while (true) {
      if (process_gone(file.pid))
        throw ProviderError(
            fmt::format("the sandbox's server exited at start: {}", log_tail(dir / "server.log")));
      if (fs::exists(socket)) {
        const IsAliveResponse alive = co_await runtime.is_alive();
        if (alive.is_alive)
          break;
      }
      if (std::chrono::steady_clock::now() >= give_up)
        throw ProviderError(fmt::format("the sandbox's server did not answer within {} ms: {}",
                                        s.cfg.startup_timeout.count(),
                                        log_tail(dir / "server.log")));
      co_await pause(delay);
      delay = std::min<std::chrono::microseconds>(delay * 2, 5ms);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    co_await s.end_server(dir, socket);
    try {
      s.remove_dir(dir);
    } catch (const std::exception& e) {
      spdlog::error("gateway: {}", e.what());
    }
    rethrow_as_provider_error(failure);
  }
  co_return address;
}

asio::awaitable<void> LocalProvider::destroy(std::string sandbox_id) {
  Impl& s = *impl_;
  if (!valid_sandbox_id(sandbox_id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", sandbox_id));
  const fs::path dir = s.dir_of(sandbox_id);
  if (!fs::exists(dir))
    co_return;
  co_await s.end_server(dir, s.socket_of(sandbox_id));
  s.remove_dir(dir);
}

asio::awaitable<std::vector<SandboxListing>> LocalProvider::list() {
  Impl& s = *impl_;
  std::vector<SandboxListing> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(s.cfg.root, ec)) {
    if (!entry.is_directory())
      continue;
    const std::string id = entry.path().filename().string();
    const auto file = read_sandbox_file(entry.path());
    if (!file) {
      // A directory without a readable sandbox.json: a create cut off before its first write.
      // Only directories that look like ours are reported, under their own name.
      if (valid_sandbox_id(id))
        out.push_back(SandboxListing{id, id, false, 0});
      continue;
    }
    if (file->gateway_id != s.cfg.gateway_id)
      continue;
    out.push_back(SandboxListing{id, file->session_id, our_process(file->pid, s.socket_of(id)),
                                 file->created_at});
  }
  co_return out;
}

}  // namespace rex::gateway
