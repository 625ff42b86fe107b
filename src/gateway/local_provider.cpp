#include <rex/core/log.hpp>
#include <rex/gateway/local_provider.hpp>

#include <rex/core/random.hpp>
#include <rex/http/url.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "core/crash_point.hpp"
#include "core/offload.hpp"
#include "core/spawn.hpp"
#include "core/unique_fd.hpp"
#include "gateway/notebook.hpp"
#include "gateway/session_record.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
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

// The command line of `pid` while it runs; nothing once it has ended (absent, or a zombie).
std::optional<std::string> live_command_line(pid_t pid) {
  if (pid <= 0 || process_gone(pid))
    return std::nullopt;
  return read_text(fmt::format("/proc/{}/cmdline", pid));
}

// Whether `pid` is a live process whose command line names `marker` (the sandbox's socket):
// a pid reused by something else after the server ended is not ours.
bool our_process(pid_t pid, const std::string& marker) {
  const auto cmdline = live_command_line(pid);
  return cmdline && cmdline->find(marker) != std::string::npos;
}

// Whether `pid`, found ours and signalled, has yet to end: it runs, and its command line names
// `marker` or is empty. A process in the middle of its exit has released its memory, and with it
// its command line, some time before it becomes a zombie (closing its descriptors, its ptys
// among them, comes in between).
bool still_ending(pid_t pid, const std::string& marker) {
  const auto cmdline = live_command_line(pid);
  return cmdline && (cmdline->empty() || cmdline->find(marker) != std::string::npos);
}

// The live processes whose command line names `marker`: a sandbox's server whose pid no
// sandbox.json names (the gateway ended between the server's start and its record).
// The processes of this machine (this one aside) that `wanted` picks.
template <class Wanted>
std::vector<pid_t> processes_where(Wanted wanted) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (pid != ::getpid() && wanted(pid))
      found.push_back(pid);
  }
  return found;
}

std::vector<pid_t> processes_naming(const std::string& marker) {
  return processes_where([&marker](pid_t pid) { return our_process(pid, marker); });
}

// Copies a directory tree as `cp -a` does, sharing the files' blocks (reflink) where the file
// system can. ProviderError with cp's words when it fails.
void copy_tree(const fs::path& from, const fs::path& to) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw ProviderError(
        fmt::format("cannot copy {}: pipe: {}", from.string(), std::strerror(errno)));
  rex::detail::UniqueFd read_end(pipe_fds[0]);
  rex::detail::UniqueFd write_end(pipe_fds[1]);
  rex::detail::SpawnOptions options;
  options.argv = {"cp", "-a", "--reflink=auto", "--", from.string(), to.string()};
  options.stderr_fd = write_end.get();
  rex::detail::SpawnedChild child;
  try {
    child = rex::detail::spawn_process(options);
  } catch (const std::exception& e) {
    throw ProviderError(fmt::format("cannot copy {}: {}", from.string(), e.what()));
  }
  write_end = rex::detail::UniqueFd();
  std::string said;
  char buffer[4096];
  for (ssize_t n; (n = ::read(read_end.get(), buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    if (said.size() < 4096)
      said.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (child.pidfd >= 0)
    ::close(child.pidfd);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw ProviderError(fmt::format("cannot copy {} to {}: {}", from.string(), to.string(), said));
}

// Every process that runs for the sandbox (the server and what its sessions started): they
// carry REX_SANDBOX=<id> in their environment, which the server was started with.
std::vector<pid_t> sandbox_processes(const std::string& sandbox_id) {
  const std::string marker = "REX_SANDBOX=" + sandbox_id;
  return processes_where([&marker](pid_t pid) {
    const std::string env = read_text(fs::path("/proc") / std::to_string(pid) / "environ");
    for (std::size_t at = 0; at < env.size();) {
      const std::size_t end = env.find('\0', at);
      const std::string_view var(env.data() + at,
                                 (end == std::string::npos ? env.size() : end) - at);
      if (var == marker)
        return true;
      at = end == std::string::npos ? env.size() : end + 1;
    }
    return false;
  });
}

// utime + stime of the processes, in clock ticks.
std::uint64_t cpu_ticks(const std::vector<pid_t>& pids) {
  std::uint64_t ticks = 0;
  for (const pid_t pid : pids) {
    const std::string stat = read_text(fs::path("/proc") / std::to_string(pid) / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    std::uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14)
        utime = std::strtoull(field.c_str(), nullptr, 10);
      if (i == 15)
        stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    ticks += utime + stime;
  }
  return ticks;
}

std::uint64_t resident_bytes(pid_t pid) {
  std::istringstream statm(read_text(fs::path("/proc") / std::to_string(pid) / "statm"));
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::uint64_t tree_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec) && !it->is_symlink(size_ec))
      total += it->file_size(size_ec);
  }
  return total;
}

struct SandboxFile {
  std::string gateway_id;
  std::string session_id;  // empty for a spare not handed out
  double created_at = 0;
  pid_t pid = 0;
  bool spare = false;  // started ahead of time, for whichever session comes
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
    if (const auto* spare = o.if_contains("spare"))
      f.spare = spare->is_bool() && spare->get_bool();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return f;
}

void write_sandbox_file(const fs::path& dir, const SandboxFile& f) {
  const json::object o{{"gateway_id", f.gateway_id},
                       {"session_id", f.session_id},
                       {"created_at", f.created_at},
                       {"pid", f.pid},
                       {"spare", f.spare}};
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

// Starts the server in a session and process group of its own, with its output in `log`. It
// is a child of the gateway (reaped by reap_when_done) but belongs to no terminal or group of
// the gateway's, so it lives on when the gateway dies. A vfork-style spawn: the gateway's
// memory is not copied, and every step up to exec is checked.
rex::detail::SpawnedChild start_server(const std::vector<std::string>& args,
                                       const std::vector<std::string>& env, const std::string& cwd,
                                       const std::string& log) {
  rex::detail::UniqueFd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (out.get() < 0)
    throw ProviderError(fmt::format("cannot open {}: {}", log, std::strerror(errno)));
  rex::detail::SpawnOptions options;
  options.argv = args;
  options.env = env;
  options.cwd = cwd;
  options.stdout_fd = out.get();
  options.stderr_fd = out.get();
  options.new_session = true;
  try {
    return rex::detail::spawn_process(options);
  } catch (const std::exception& e) {
    throw ProviderError(fmt::format("cannot start the sandbox's server: {}", e.what()));
  }
}

// Waits (without blocking) for a server started here to end, and reaps it.
asio::awaitable<void> reap_when_done(pid_t pid, int pidfd) {
  asio::posix::stream_descriptor exited(co_await asio::this_coro::executor, pidfd);
  auto [ec] = co_await exited.async_wait(asio::posix::stream_descriptor::wait_read,
                                         asio::as_tuple(asio::use_awaitable));
  if (!ec) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) < 0 && errno == EINTR) {
    }
  }
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

asio::awaitable<void> nap(std::chrono::microseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(d);
  co_await timer.async_wait(asio::use_awaitable);
}

// A client of a sandbox's server.
RemoteRuntimeConfig server_client(const SandboxAddress& address) {
  RemoteRuntimeConfig rc;
  rc.url = address.url;
  rc.auth_token = address.token;
  return rc;
}

// A spare's own deadline: one left behind by a gateway that never comes back ends by itself.
// tend_spares() replaces spares well before it.
constexpr double kSpareLifetime = 3600;
constexpr double kSpareRetireAge = 3000;
constexpr auto kRefillDelay = 10ms;

// What makes two specs' sandboxes interchangeable.
std::string spare_key(const SandboxSpec& spec) {
  std::string key = spec.environment.name + '\n' + spec.environment.working_dir;
  for (const auto& [k, v] : spec.env)
    key += '\n' + k + '=' + v;
  return key;
}

}  // namespace

struct LocalProvider::Impl {
  Impl(asio::any_io_executor executor, LocalProviderConfig config)
      : ex(std::move(executor)), cfg(std::move(config)) {}
  ~Impl() { *alive = false; }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  asio::any_io_executor ex;
  LocalProviderConfig cfg;

  struct Spare {
    SandboxAddress address;
    pid_t pid = 0;
    double created_at = 0;
  };
  struct Pool {
    SandboxSpec spec;
    std::size_t count = 0;
    std::deque<Spare> ready;
    bool filling = false;
  };
  std::map<std::string, Pool> pools;  // by spare_key
  std::set<std::string> held;         // spares ready or starting: not in list()
  std::size_t fills_running = 0;
  bool dropping = false;
  asio::thread_pool starter{2};  // starts servers (spawn, exec) off the io_context
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);  // false once destroyed

  fs::path dir_of(const std::string& id) const { return cfg.root / id; }
  fs::path checkpoint_root() const {
    return cfg.checkpoint_root.empty() ? cfg.root.parent_path() / "checkpoints"
                                       : cfg.checkpoint_root;
  }
  fs::path checkpoint_dir(const std::string& id) const { return checkpoint_root() / id; }
  std::string socket_of(const std::string& id) const { return (dir_of(id) / kSocketName).string(); }

  // Ends the server of a sandbox directory: SIGTERM (its sessions close), then SIGKILL after
  // the grace period. Returns when the process is gone.
  asio::awaitable<void> end_server(const fs::path& dir, const std::string& socket) {
    const auto file = read_sandbox_file(dir);
    if (file && file->pid > 0) {
      co_await end_process(file->pid, socket);
      co_return;
    }
    // Its record was written before the server started and not again: the server, if it was
    // started, is found by its socket's path, which its command line names.
    for (const pid_t pid : processes_naming(socket))
      co_await end_process(pid, socket);
  }

  // The same for a server known by its pid (and the socket its command line names).
  asio::awaitable<void> end_process(pid_t pid, const std::string& socket) {
    if (!our_process(pid, socket))
      co_return;
    ::kill(pid, SIGTERM);
    const auto give_up = std::chrono::steady_clock::now() + cfg.stop_grace;
    while (still_ending(pid, socket)) {
      if (std::chrono::steady_clock::now() >= give_up) {
        logging::warn("gateway: sandbox server {} did not end on SIGTERM; killing it", pid);
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
      }
      co_await nap(10ms);
    }
  }

  void remove_dir(const fs::path& dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec)
      throw ProviderError(fmt::format("cannot remove {}: {}", dir.string(), ec.message()));
  }

  // Starts a sandbox's server in its own directory and waits until it answers. A failure
  // leaves nothing behind.
  asio::awaitable<SandboxAddress> start_sandbox(const std::string& id, const SandboxSpec& spec,
                                                double max_lifetime, bool spare, pid_t* pid_out);
  // Hands a ready spare of `spec`'s kind to spec.session_id; nullopt when there is none.
  asio::awaitable<std::optional<SandboxAddress>> take_spare(const SandboxSpec& spec);
  // Starts spares until the pool is full (one at a time), unless it is filling already.
  void refill(const std::string& key);
  asio::awaitable<void> fill(std::string key);
  asio::awaitable<void> destroy_spare(std::string id);
};

LocalProvider::LocalProvider(asio::any_io_executor executor, LocalProviderConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {
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

asio::awaitable<SandboxAddress> LocalProvider::Impl::start_sandbox(const std::string& id,
                                                                   const SandboxSpec& spec,
                                                                   double max_lifetime, bool spare,
                                                                   pid_t* pid_out) {
  Impl& s = *this;
  const fs::path dir = s.dir_of(id);
  std::error_code ec;
  if (!fs::create_directory(dir, ec))
    throw ProviderError(
        fmt::format("cannot create {}: {}", dir.string(), ec ? ec.message() : "it exists already"));
  ::chmod(dir.c_str(), 0700);
  rex::detail::crash_point("local.dir_made");
  SandboxAddress address;
  address.sandbox_id = id;
  address.token = random_hex(16);
  const std::string socket = s.socket_of(id);
  address.url = http::unix_socket_url(socket);
  const fs::path work =
      spec.environment.working_dir.empty() ? dir / "work" : fs::path(spec.environment.working_dir);
  address.working_dir = work.string();
  address.scratch_dir = (dir / "notebook").string();

  pid_t started = 0;  // the server, once spawned
  std::exception_ptr failure;
  SandboxFile file{s.cfg.gateway_id, spare ? std::string() : spec.session_id, unix_now(), 0, spare};
  try {
    write_sandbox_file(dir, file);  // before the process: a crash between leaves a record
    rex::detail::crash_point("local.file_written");
    if (!spec.image.empty()) {
      // A checkpoint's copy of its working directory becomes this one's.
      if (!spec.environment.working_dir.empty())
        throw ProviderError("a sandbox from a checkpoint works in its own directory");
      const fs::path copy = s.checkpoint_dir(spec.image) / "work";
      if (!fs::is_directory(copy))
        throw ProviderError(
            fmt::format("checkpoint {} has no copy at {}", spec.image, copy.string()));
      auto copying = [copy, work] { copy_tree(copy, work); };
      co_await rex::detail::offload(s.starter, s.ex, std::move(copying));
    }
    fs::create_directories(work);
    std::vector<std::string> args = s.cfg.server_command;
    for (const char* a : {"--unix-socket", socket.c_str(), "--log-level", "warn"})
      args.emplace_back(a);
    if (max_lifetime > 0) {
      args.emplace_back("--max-lifetime");
      args.push_back(fmt::format("{}", max_lifetime));
    }
    std::map<std::string, std::string> env_map = rex::detail::current_environment();
    for (const auto& [k, v] : spec.env)
      env_map[k] = v;
    env_map["REX_SANDBOX"] = id;
    // Not on its command line, which every user of the machine can list: the server reads it
    // from its environment and removes it there.
    env_map["REX_AUTH_TOKEN"] = address.token;
    const std::vector<std::string> env = rex::detail::environment_entries(env_map);

    // The wait for exec (a millisecond or so) is not the io_context's.
    auto start = [&args, &env, &work, &dir] {
      return start_server(args, env, work.string(), (dir / "server.log").string());
    };
    const rex::detail::SpawnedChild child =
        co_await rex::detail::offload(s.starter, s.ex, std::move(start));
    started = child.pid;
    file.pid = child.pid;
    asio::co_spawn(s.ex, reap_when_done(child.pid, child.pidfd), asio::detached);
    rex::detail::crash_point("local.server_started");
    write_sandbox_file(dir, file);
    rex::detail::crash_point("local.pid_written");
    if (pid_out != nullptr)
      *pid_out = file.pid;

    RemoteRuntimeConfig rc = server_client(address);
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
      co_await nap(delay);
      delay = std::min<std::chrono::microseconds>(delay * 2, 5ms);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    // By its pid: its sandbox.json may not name it yet.
    if (started > 0)
      co_await s.end_process(started, socket);
    else
      co_await s.end_server(dir, socket);
    try {
      s.remove_dir(dir);
    } catch (const std::exception& e) {
      logging::error("gateway: {}", e.what());
    }
    rethrow_as_provider_error(failure);
  }
  co_return address;
}

asio::awaitable<SandboxAddress> LocalProvider::create(SandboxSpec spec) {
  Impl& s = *impl_;
  if (!valid_sandbox_id(spec.session_id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", spec.session_id));
  if (!spec.image.empty()) {
    // The session's sandbox may still exist (a rewind): this one has an id of its own.
    const std::string id = spec.session_id + "-" + random_hex(3);
    co_return co_await s.start_sandbox(id, spec, spec.max_lifetime, false, nullptr);
  }
  if (auto spare = co_await s.take_spare(spec))
    co_return std::move(*spare);
  co_return co_await s.start_sandbox(spec.session_id, spec, spec.max_lifetime, false, nullptr);
}

// --- checkpoints, pauses, metrics --------------------------------------------------------

bool LocalProvider::can(SandboxOperation operation) const noexcept {
  return operation != SandboxOperation::build;  // a local sandbox runs no image
}

asio::awaitable<std::string> LocalProvider::checkpoint(std::string sandbox_id,
                                                       std::map<std::string, std::string> labels) {
  Impl& s = *impl_;
  if (!valid_sandbox_id(sandbox_id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", sandbox_id));
  const fs::path work = s.dir_of(sandbox_id) / "work";
  if (!fs::is_directory(work))
    throw ProviderError(fmt::format(
        "the local provider checkpoints a sandbox that works in its own directory; {} has none",
        sandbox_id));
  const auto label = labels.find("rex.checkpoint");
  const std::string id = label != labels.end() && valid_sandbox_id(label->second)
                             ? label->second
                             : "ckpt-" + random_hex(8);
  labels["rex.gateway"] = s.cfg.gateway_id;
  const fs::path target = s.checkpoint_dir(id);
  auto copying = [work, target, labels] {
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (!fs::create_directory(target, ec))
      throw ProviderError(fmt::format("cannot create {}: {}", target.string(),
                                      ec ? ec.message() : "it exists already"));
    try {
      // The labels first: a copy cut off is found (and removed) by them.
      json::object o;
      for (const auto& [k, v] : labels)
        o[k] = v;
      o["created_at"] = unix_now();
      std::ofstream(target / "checkpoint.json") << json::serialize(o);
      copy_tree(work, target / "work");
    } catch (...) {
      fs::remove_all(target, ec);
      throw;
    }
  };
  co_await rex::detail::offload(s.starter, s.ex, std::move(copying));
  co_return id;
}

asio::awaitable<void> LocalProvider::remove_checkpoint(std::string image) {
  Impl& s = *impl_;
  if (!valid_sandbox_id(image))
    throw ProviderError(fmt::format("invalid checkpoint {:?}", image));
  auto removing = [dir = s.checkpoint_dir(image)] {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec)
      throw ProviderError(fmt::format("cannot remove {}: {}", dir.string(), ec.message()));
  };
  co_await rex::detail::offload(s.starter, s.ex, std::move(removing));
}

asio::awaitable<std::vector<SandboxInfo>> LocalProvider::list_checkpoints() {
  Impl& s = *impl_;
  std::vector<SandboxInfo> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(s.checkpoint_root(), ec)) {
    const std::string id = entry.path().filename().string();
    SandboxInfo info;
    info.id = id;
    try {
      const json::value v = json::parse(read_text(entry.path() / "checkpoint.json"));
      for (const auto& [k, val] : v.as_object()) {
        if (val.is_string())
          info.labels[std::string(k)] = std::string(val.get_string());
        else if (k == "created_at" && val.is_number())
          info.created_at = val.to_number<double>();
      }
    } catch (const std::exception&) {
      // Its labels not written yet, or cut off: the folder is this gateway's all the same (the
      // checkpoints' folder is in its storage), named after the checkpoint, as old as its
      // last change.
      struct stat st {};
      if (::stat(entry.path().c_str(), &st) == 0)
        info.created_at = static_cast<double>(st.st_mtime);
    }
    info.labels.try_emplace("rex.checkpoint", id);
    info.labels.try_emplace("rex.gateway", s.cfg.gateway_id);
    if (info.labels["rex.gateway"] == s.cfg.gateway_id)
      out.push_back(std::move(info));
  }
  co_return out;
}

asio::awaitable<void> LocalProvider::pause(std::string sandbox_id) {
  Impl& s = *impl_;
  if (!valid_sandbox_id(sandbox_id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", sandbox_id));
  const auto pids = sandbox_processes(sandbox_id);
  if (pids.empty())
    throw ProviderError(fmt::format("sandbox {} runs no process", sandbox_id));
  for (const pid_t pid : pids)
    ::kill(pid, SIGSTOP);
  (void)s;
  co_return;
}

asio::awaitable<void> LocalProvider::resume(std::string sandbox_id) {
  if (!valid_sandbox_id(sandbox_id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", sandbox_id));
  for (const pid_t pid : sandbox_processes(sandbox_id))
    ::kill(pid, SIGCONT);
  co_return;
}

asio::awaitable<SandboxMetrics> LocalProvider::metrics(std::string sandbox_id) {
  Impl& s = *impl_;
  if (!valid_sandbox_id(sandbox_id))
    throw ProviderError(fmt::format("invalid sandbox id {:?}", sandbox_id));
  const fs::path dir = s.dir_of(sandbox_id);
  auto measure = [sandbox_id, dir] {
    SandboxMetrics m;
    const auto first = cpu_ticks(sandbox_processes(sandbox_id));
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto pids = sandbox_processes(sandbox_id);
    const auto second = cpu_ticks(pids);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long hz = ::sysconf(_SC_CLK_TCK);
    m.cpu_count = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
    if (second > first && hz > 0 && seconds > 0)
      m.cpu_percent =
          std::min(100.0, 100.0 * static_cast<double>(second - first) / hz / seconds / m.cpu_count);
    for (const pid_t pid : pids)
      m.memory_used += resident_bytes(pid);
    m.memory_limit = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                     static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    m.disk_used = tree_bytes(dir);
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) == 0)
      m.disk_total = static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize;
    m.timestamp = unix_now();
    return m;
  };
  co_return co_await rex::detail::offload(s.starter, s.ex, std::move(measure));
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

// --- spares ----------------------------------------------------------------------------------

asio::awaitable<std::optional<SandboxAddress>> LocalProvider::Impl::take_spare(
    const SandboxSpec& spec) {
  const std::string key = spare_key(spec);
  const auto it = pools.find(key);
  if (it == pools.end())
    co_return std::nullopt;
  std::optional<SandboxAddress> taken;
  while (!taken && !it->second.ready.empty()) {
    Spare spare = std::move(it->second.ready.front());
    it->second.ready.pop_front();
    const std::string id = spare.address.sandbox_id;
    const fs::path dir = dir_of(id);
    std::string failure;
    try {
      if (!our_process(spare.pid, socket_of(id)))
        throw ProviderError("its server has ended");
      // From here the sandbox is the session's: list() reports it under the session's id.
      write_sandbox_file(
          dir, SandboxFile{cfg.gateway_id, spec.session_id, spare.created_at, spare.pid, false});
      rex::detail::crash_point("local.spare_handed");
      held.erase(id);
      RemoteRuntimeConfig rc = server_client(spare.address);
      rc.request_timeout = 5s;
      RemoteRuntime runtime(ex, rc);
      co_await runtime.set_max_lifetime(spec.max_lifetime);
      taken = std::move(spare.address);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      logging::warn("gateway: spare sandbox {} cannot be handed out: {}", id, failure);
      co_await destroy_spare(id);
    }
  }
  refill(key);
  co_return taken;
}

void LocalProvider::Impl::refill(const std::string& key) {
  const auto it = pools.find(key);
  if (dropping || it == pools.end() || it->second.filling ||
      it->second.ready.size() >= it->second.count)
    return;
  it->second.filling = true;
  ++fills_running;
  asio::co_spawn(ex, fill(key), [this](std::exception_ptr failure) {
    --fills_running;
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        logging::warn("gateway: cannot start spare sandboxes ({}); trying again later", e.what());
      }
    }
  });
}

asio::awaitable<void> LocalProvider::Impl::fill(std::string key) {
  // Cleared as the fill ends (with nothing awaited after its last look at the pool), so a spare
  // taken at any moment either is seen by this fill or starts the next one.
  // (A frame destroyed unfinished after the provider is gone touches nothing.)
  struct Filled {
    Impl& s;
    const std::string& key;
    std::shared_ptr<bool> alive;
    ~Filled() {
      if (!*alive)
        return;
      if (const auto p = s.pools.find(key); p != s.pools.end())
        p->second.filling = false;
    }
  } filled{*this, key, alive};
  // The create that took a spare answers first: its sandbox's start is not slowed by this one.
  co_await nap(kRefillDelay);
  while (!dropping) {
    Pool& pool = pools.at(key);
    if (pool.ready.size() >= pool.count)
      break;
    const std::string id = "w" + random_hex(8);
    held.insert(id);
    Spare spare;
    spare.created_at = unix_now();
    std::exception_ptr failure;
    try {
      spare.address = co_await start_sandbox(id, pool.spec, kSpareLifetime, true, &spare.pid);
      RemoteRuntime runtime(ex, server_client(spare.address));
      co_await start_notebook_shell(runtime, spare.address.working_dir);
      spare.address.shell_started = true;
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure || dropping) {
      co_await destroy_spare(id);
      if (failure)
        std::rethrow_exception(failure);
      break;
    }
    pools.at(key).ready.push_back(std::move(spare));
  }
}

asio::awaitable<void> LocalProvider::Impl::destroy_spare(std::string id) {
  // Held (out of list()) until it is gone, so the drift check does not remove it too.
  held.insert(id);
  const fs::path dir = dir_of(id);
  try {
    co_await end_server(dir, socket_of(id));
    remove_dir(dir);
  } catch (const std::exception& e) {
    logging::error("gateway: cannot remove spare sandbox {}: {}", id, e.what());
  }
  held.erase(id);
}

void LocalProvider::keep_spares(SandboxSpec spec, std::size_t count) {
  Impl& s = *impl_;
  spec.session_id.clear();
  spec.max_lifetime = 0;
  const std::string key = spare_key(spec);
  Impl::Pool& pool = s.pools[key];
  pool.spec = std::move(spec);
  pool.count = std::min(count, kMaxSpares);
  s.refill(key);
}

asio::awaitable<void> LocalProvider::tend_spares() {
  Impl& s = *impl_;
  const double now = unix_now();
  for (auto& [key, pool] : s.pools) {
    // Spares that ended, or near their own deadline, make way for new ones.
    std::vector<std::string> gone;
    std::erase_if(pool.ready, [&](const Impl::Spare& spare) {
      const std::string& id = spare.address.sandbox_id;
      const bool stale =
          now - spare.created_at > kSpareRetireAge || !our_process(spare.pid, s.socket_of(id));
      if (stale)
        gone.push_back(id);
      return stale;
    });
    for (auto& id : gone)
      co_await s.destroy_spare(std::move(id));
  }
  for (const auto& [key, pool] : s.pools)
    s.refill(key);
}

asio::awaitable<void> LocalProvider::drop_spares() {
  Impl& s = *impl_;
  s.dropping = true;
  for (auto& [key, pool] : s.pools) {
    while (!pool.ready.empty()) {
      const std::string id = pool.ready.front().address.sandbox_id;
      pool.ready.pop_front();
      co_await s.destroy_spare(id);
    }
  }
  // A spare being started is removed by its fill when it is up.
  const auto give_up = std::chrono::steady_clock::now() + s.cfg.startup_timeout;
  while (s.fills_running > 0 && std::chrono::steady_clock::now() < give_up)
    co_await nap(10ms);
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
    if (file->gateway_id != s.cfg.gateway_id || s.held.contains(id))
      continue;
    SandboxListing listing{id, file->session_id, our_process(file->pid, s.socket_of(id)),
                           file->created_at};
    listing.spare = file->spare && file->session_id.empty();
    out.push_back(std::move(listing));
  }
  co_return out;
}

}  // namespace rex::gateway
