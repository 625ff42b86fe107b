// Background processes (rex/protocol/processes.hpp): the same behaviour checked against a
// LocalRuntime in this process and against a RemoteRuntime talking to the rex-server executable
// (started per test on a unix socket): events in order, output as it comes, stdin, signals,
// listeners that stop, keepalives, errors, env and cwd; then what only one of them shows: a
// LocalRuntime destroyed with a process running, a rex-server stopped with one.
//
// The rex-server executable is REX_SERVER_PATH when set, else the one of the build tree this
// test executable belongs to (build/<dir>/rex-server beside build/<dir>/tests/).
#include <rex/core/event.hpp>
#include <rex/core/timeout.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/processes.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <boost/asio.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Kind = ProcessEvent::Kind;
using test::TempDir;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// --- Helpers for coroutine bodies ----------------------------------------------------------

// Everything a listener saw, in order, with when it saw it.
struct EventsSeen {
  std::vector<ProcessEvent> events;
  std::vector<Clock::time_point> times;

  void add(const ProcessEvent& e) {
    events.push_back(e);
    times.push_back(Clock::now());
  }
  std::string data(Kind kind) const {
    std::string out;
    for (const auto& e : events)
      if (e.kind == kind)
        out += e.data;
    return out;
  }
  int count(Kind kind) const {
    int n = 0;
    for (const auto& e : events)
      n += e.kind == kind ? 1 : 0;
    return n;
  }
  long started_pid() const {
    for (const auto& e : events)
      if (e.kind == Kind::started)
        return e.pid;
    return 0;
  }
};

// A start_process or connect_process call running beside the test body.
struct Beside {
  EventsSeen seen;
  bool done = false;
  std::optional<ProcessEnd> end;
  std::exception_ptr error;
};

void finish_beside(const std::shared_ptr<Beside>& b, std::exception_ptr e,
                   std::optional<ProcessEnd> end) {
  b->error = e;
  b->end = std::move(end);
  b->done = true;
}

// The process call running beside the test body, its events and end collected in a Beside.
std::shared_ptr<Beside> follow_beside(
    const asio::any_io_executor& ex,
    const std::function<asio::awaitable<std::optional<ProcessEnd>>(Runtime::ProcessListener)>&
        call) {
  auto b = std::make_shared<Beside>();
  Runtime::ProcessListener listener = [b](const ProcessEvent& e) {
    b->seen.add(e);
    return true;
  };
  auto op = call(std::move(listener));
  asio::co_spawn(ex, std::move(op), [b](std::exception_ptr e, std::optional<ProcessEnd> end) {
    finish_beside(b, e, std::move(end));
  });
  return b;
}

std::shared_ptr<Beside> start_beside(Runtime& rt, ProcessConfig config,
                                     const asio::any_io_executor& ex) {
  return follow_beside(ex, [&rt, &config](Runtime::ProcessListener l) {
    return rt.start_process(std::move(config), std::move(l));
  });
}

std::shared_ptr<Beside> connect_beside(Runtime& rt, ProcessSelector which,
                                       const asio::any_io_executor& ex) {
  return follow_beside(ex, [&rt, &which](Runtime::ProcessListener l) {
    return rt.connect_process(std::move(which), std::move(l));
  });
}

// Waits (polling every 5 ms) until `condition` holds; throws naming `what` after `within`.
asio::awaitable<void> wait_until(std::function<bool()> condition, std::string what,
                                 Clock::duration within = 10s) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto until = Clock::now() + within;
  while (!condition()) {
    if (Clock::now() > until)
      throw std::runtime_error("timed out waiting until " + what);
    timer.expires_after(5ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

// Waits until a call running beside has returned; its error, when it threw, is rethrown.
asio::awaitable<ProcessEnd> end_of(std::shared_ptr<Beside> b, std::string what,
                                   Clock::duration within = 10s) {
  auto returned = [b] { return b->done; };
  auto wait = wait_until(returned, what + " returns", within);
  co_await std::move(wait);
  if (b->error)
    std::rethrow_exception(b->error);
  if (!b->end)
    throw std::runtime_error(what + " returned no end");
  co_return *b->end;
}

asio::awaitable<std::optional<ProcessInfo>> listed(Runtime& rt, long pid) {
  auto list_op = rt.list_processes();
  const ProcessListResponse list = co_await std::move(list_op);
  for (const auto& p : list.processes)
    if (p.pid == pid)
      co_return p;
  co_return std::nullopt;
}

// --- The rex-server executable -------------------------------------------------------------

std::string rex_server_binary() {
  if (const char* path = std::getenv("REX_SERVER_PATH"); path != nullptr && *path != '\0')
    return path;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    return {};
  for (const fs::path& candidate :
       {self.parent_path().parent_path() / "rex-server", self.parent_path() / "rex-server"}) {
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  }
  return {};
}

// A rex-server process on a unix socket in a directory of its own; its output goes to a log
// file there, shown when something about the server fails. Stopped (SIGTERM, then SIGKILL
// after 10 s) when destroyed.
class RexServerProcess {
 public:
  static constexpr const char* kToken = "processes-test";

  explicit RexServerProcess(const std::string& binary)
      : socket_(dir_.path() + "/rex.sock"), log_(dir_.path() + "/server.log") {
    std::vector<std::string> args{binary, "--unix-socket", socket_, "--auth-token",
                                  kToken, "--log-level",   "info"};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    ::posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = ::posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
      throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
  }

  ~RexServerProcess() {
    if (pid_ > 0 && !stop(10s))
      ADD_FAILURE() << "rex-server did not exit within 10 s of SIGTERM; log:\n" << log();
  }
  RexServerProcess(const RexServerProcess&) = delete;
  RexServerProcess& operator=(const RexServerProcess&) = delete;

  RemoteRuntimeConfig config() const {
    RemoteRuntimeConfig cfg;
    cfg.url = "http+unix://" + socket_;
    cfg.auth_token = kToken;
    return cfg;
  }
  pid_t pid() const { return pid_; }
  std::string log() const { return test::read_text(log_); }

  /// SIGTERM, then waits for the exit; false (and SIGKILL) when it took longer than `within`.
  bool stop(std::chrono::milliseconds within) {
    ::kill(pid_, SIGTERM);
    const auto until = Clock::now() + within;
    bool exited = false;
    while (Clock::now() < until) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
    }
    pid_ = -1;
    return exited;
  }
  int status() const { return status_; }

 private:
  TempDir dir_;
  std::string socket_;
  std::string log_;
  pid_t pid_ = -1;
  int status_ = 0;
};

// --- The runtimes ----------------------------------------------------------------------------

enum class Backend { local, server };

void PrintTo(Backend backend, std::ostream* os) {
  *os << (backend == Backend::local ? "LocalRuntime" : "RemoteRuntime to rex-server");
}

std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::local ? "Local" : "RexServer";
}

class ProcessesTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::local) {
      runtime_ = std::make_unique<LocalRuntime>(io_.get_executor());
      return;
    }
    const std::string binary = rex_server_binary();
    ASSERT_FALSE(binary.empty())
        << "no rex-server executable: build the rex-server target or set REX_SERVER_PATH";
    server_.emplace(binary);
    auto remote = std::make_unique<RemoteRuntime>(io_.get_executor(), server_->config());
    try {
      test::run_async(io_, remote->wait_until_alive(10s), 15s);
    } catch (const std::exception& e) {
      FAIL() << "rex-server did not come up: " << e.what() << "; log:\n" << server_->log();
    }
    runtime_ = std::move(remote);
  }

  void TearDown() override {
    if (HasFailure() && server_)
      std::cerr << "rex-server's log:\n" << server_->log();
  }

  void run(asio::awaitable<void> body, Clock::duration deadline = 20s) {
    test::run_async(io_, std::move(body), deadline);
  }

  Runtime& rt() { return *runtime_; }

  asio::io_context io_;
  // Destroyed in this order: the runtime, then the server it talks to, then the io_context.
  std::optional<RexServerProcess> server_;
  std::unique_ptr<Runtime> runtime_;
};

INSTANTIATE_TEST_SUITE_P(Runtimes, ProcessesTest,
                         ::testing::Values(Backend::local, Backend::server), backend_name);

// --- 1. Events in order, stdout and stderr apart, the exit code -------------------------------

asio::awaitable<void> exit_code_and_separate_streams(Runtime& rt) {
  EventsSeen seen;
  Runtime::ProcessListener listener = [&seen](const ProcessEvent& e) {
    seen.add(e);
    return true;
  };
  ProcessConfig config{.argv = {"bash", "-c", "echo one; sleep 0.3; echo two >&2; exit 3"}};
  auto op = rt.start_process(std::move(config), std::move(listener));
  const std::optional<ProcessEnd> end = co_await std::move(op);

  if (seen.events.empty()) {
    ADD_FAILURE() << "no event at all";
    co_return;
  }
  EXPECT_EQ(seen.events.front().kind, Kind::started);
  EXPECT_GT(seen.events.front().pid, 0);
  EXPECT_EQ(seen.count(Kind::started), 1);
  EXPECT_EQ(seen.data(Kind::stdout_data), "one\n");
  EXPECT_EQ(seen.data(Kind::stderr_data), "two\n");
  for (const auto& e : seen.events) {
    if (e.kind == Kind::stdout_data || e.kind == Kind::stderr_data) {
      EXPECT_FALSE(e.data.empty()) << "an output event without bytes";
    }
  }
  if (!end) {
    ADD_FAILURE() << "start_process returned no end";
    co_return;
  }
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_FALSE(end->signal.has_value());
  EXPECT_EQ(end->status, "exit status 3");
}

TEST_P(ProcessesTest, ExitCodeAndSeparateStreams) {
  run(exit_code_and_separate_streams(rt()));
}

// --- 2. Output arrives as it is produced ---------------------------------------------------

asio::awaitable<void> output_streams_as_produced(Runtime& rt) {
  EventsSeen seen;
  Runtime::ProcessListener listener = [&seen](const ProcessEvent& e) {
    seen.add(e);
    return true;
  };
  ProcessConfig config{.argv = {"bash", "-c", "echo a; sleep 0.5; echo b"}};
  auto op = rt.start_process(std::move(config), std::move(listener));
  const std::optional<ProcessEnd> end = co_await std::move(op);
  const auto returned = Clock::now();

  std::optional<Clock::time_point> a_at, b_at;
  for (std::size_t i = 0; i < seen.events.size(); ++i) {
    const auto& e = seen.events[i];
    if (e.kind != Kind::stdout_data)
      continue;
    if (e.data.find('a') != std::string::npos && !a_at)
      a_at = seen.times[i];
    if (e.data.find('b') != std::string::npos && !b_at)
      b_at = seen.times[i];
  }
  EXPECT_EQ(seen.data(Kind::stdout_data), "a\nb\n");
  if (!a_at || !b_at) {
    ADD_FAILURE() << "no stdout event carrying a or b";
    co_return;
  }
  EXPECT_GE(seconds_between(*a_at, *b_at), 0.4) << "a arrived with b: the output was held back";
  EXPECT_LE(*b_at, returned);
  EXPECT_TRUE(end && end->exit_code == 0);
}

TEST_P(ProcessesTest, OutputStreamsAsItIsProduced) {
  run(output_streams_as_produced(rt()));
}

// --- 3. stdin: listed, written by tag, closed ---------------------------------------------

asio::awaitable<void> stdin_written_and_closed(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  ProcessConfig config{.argv = {"cat"}, .tag = "the-cat", .stdin_pipe = true};
  auto cat = start_beside(rt, std::move(config), ex);
  auto started = [cat] { return cat->seen.started_pid() > 0 || cat->done; };
  auto wait_started = wait_until(started, "cat has started");
  co_await std::move(wait_started);
  const long pid = cat->seen.started_pid();
  if (pid <= 0) {
    ADD_FAILURE() << "cat did not start";
    co_return;
  }

  auto find = listed(rt, pid);
  const std::optional<ProcessInfo> info = co_await std::move(find);
  if (!info) {
    ADD_FAILURE() << "cat (pid " << pid << ") is not listed";
  } else {
    EXPECT_EQ(info->tag, "the-cat");
    EXPECT_EQ(info->argv, std::vector<std::string>{"cat"});
    EXPECT_TRUE(info->stdin_pipe);
  }

  ProcessInput hello{.tag = "the-cat", .data = "hello\n"};
  auto write = rt.send_process_input(std::move(hello));
  co_await std::move(write);
  auto echoed = [cat] { return cat->seen.data(Kind::stdout_data).size() >= 6 || cat->done; };
  auto wait_echoed = wait_until(echoed, "cat echoes its input");
  co_await std::move(wait_echoed);
  EXPECT_EQ(cat->seen.data(Kind::stdout_data), "hello\n");
  EXPECT_FALSE(cat->done) << "cat ended before its stdin was closed";

  ProcessInput close{.pid = pid, .close = true};
  auto closing = rt.send_process_input(std::move(close));
  co_await std::move(closing);
  auto ended = end_of(cat, "start_process of cat");
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(end.status, "exit status 0");

  auto list_op = rt.list_processes();
  const ProcessListResponse after = co_await std::move(list_op);
  EXPECT_TRUE(after.processes.empty()) << after.processes.size() << " processes still listed";
}

TEST_P(ProcessesTest, StdinIsWrittenByTagAndClosed) {
  run(stdin_written_and_closed(rt()));
}

// --- 4. Signals ----------------------------------------------------------------------------

asio::awaitable<void> signals(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  ProcessConfig config{.argv = {"sleep", "30"}};
  auto sleeper = start_beside(rt, std::move(config), ex);
  auto started = [sleeper] { return sleeper->seen.started_pid() > 0 || sleeper->done; };
  auto wait_started = wait_until(started, "sleep has started");
  co_await std::move(wait_started);
  const long pid = sleeper->seen.started_pid();
  if (pid <= 0) {
    ADD_FAILURE() << "sleep did not start";
    co_return;
  }

  // An unknown name is refused, and nothing is sent.
  ProcessSignal bogus{.pid = pid, .signal = "SIGBOGUS"};
  REX_CO_EXPECT_THROW(co_await rt.signal_process(bogus), ValueError);
  auto find = listed(rt, pid);
  const std::optional<ProcessInfo> still = co_await std::move(find);
  EXPECT_TRUE(still.has_value()) << "sleep is gone after an unknown signal";
  EXPECT_FALSE(sleeper->done);

  ProcessSignal term{.pid = pid, .signal = "SIGTERM"};
  auto signalling = rt.signal_process(std::move(term));
  co_await std::move(signalling);
  auto ended = end_of(sleeper, "start_process of sleep");
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_FALSE(end.exit_code.has_value());
  EXPECT_EQ(end.signal, 15);
  EXPECT_EQ(end.status, "signal: terminated");

  // Ended: it is no more.
  ProcessSignal again{.pid = pid, .signal = "SIGTERM"};
  REX_CO_EXPECT_THROW(co_await rt.signal_process(again), ProcessDoesNotExistError);
}

TEST_P(ProcessesTest, SignalsEndItThenItIsGone) {
  run(signals(rt()));
}

// --- 5. A listener that stops, and another that connects -------------------------------------

asio::awaitable<void> listener_stops_then_another_connects(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  EventsSeen seen;
  Runtime::ProcessListener first = [&seen](const ProcessEvent& e) {
    seen.add(e);
    return e.kind != Kind::stdout_data;
  };
  ProcessConfig config{.argv = {"bash", "-c", "echo x; sleep 30"}};
  const auto start = Clock::now();
  auto op = rt.start_process(std::move(config), std::move(first));
  const std::optional<ProcessEnd> end = co_await std::move(op);
  EXPECT_FALSE(end.has_value()) << "the listener stopped: no end expected, got " << end->status;
  EXPECT_LT(seconds_between(start, Clock::now()), 3.0);
  EXPECT_EQ(seen.data(Kind::stdout_data), "x\n");
  const long pid = seen.started_pid();
  if (pid <= 0) {
    ADD_FAILURE() << "no started event";
    co_return;
  }
  auto find = listed(rt, pid);
  const std::optional<ProcessInfo> info = co_await std::move(find);
  EXPECT_TRUE(info.has_value()) << "the process ended with its first listener";

  // A new listener: its `started` (queued as it joins) shows it listens; then the kill ends it,
  // with that end.
  ProcessSelector which{.pid = pid, .keepalive = 0.1};
  auto second = connect_beside(rt, which, ex);
  auto listening = [second] { return second->seen.started_pid() > 0 || second->done; };
  auto wait_listening = wait_until(listening, "the connected listener sees started");
  co_await std::move(wait_listening);
  EXPECT_FALSE(second->done) << "connect_process returned before the kill";

  ProcessSignal kill{.pid = pid, .signal = "SIGKILL"};
  auto signalling = rt.signal_process(std::move(kill));
  co_await std::move(signalling);
  auto ended = end_of(second, "connect_process");
  const ProcessEnd killed = co_await std::move(ended);
  EXPECT_EQ(killed.signal, 9);
  EXPECT_FALSE(killed.exit_code.has_value());
  EXPECT_EQ(killed.status, "signal: killed");
  // A connect's listener sees `started` too: once, first, with the pid.
  EXPECT_EQ(second->seen.count(Kind::started), 1);
  if (!second->seen.events.empty()) {
    EXPECT_EQ(second->seen.events.front().kind, Kind::started);
    EXPECT_EQ(second->seen.events.front().pid, pid);
  }
  EXPECT_EQ(second->seen.data(Kind::stdout_data), "") << "output from before it connected";
}

TEST_P(ProcessesTest, ListenerThatStopsLeavesItRunningForAnotherToConnect) {
  run(listener_stops_then_another_connects(rt()));
}

// --- 6. Keepalives ---------------------------------------------------------------------------

asio::awaitable<void> keepalives(Runtime& rt) {
  EventsSeen seen;
  Runtime::ProcessListener listener = [&seen](const ProcessEvent& e) {
    seen.add(e);
    return true;
  };
  ProcessConfig config{.argv = {"sleep", "0.7"}, .keepalive = 0.2};
  auto op = rt.start_process(std::move(config), std::move(listener));
  const std::optional<ProcessEnd> end = co_await std::move(op);
  EXPECT_GE(seen.count(Kind::keepalive), 2);
  EXPECT_LE(seen.count(Kind::keepalive), 5);
  EXPECT_TRUE(end && end->exit_code == 0);
}

TEST_P(ProcessesTest, KeepalivesWhileQuiet) {
  run(keepalives(rt()));
}

// --- 7. Errors -------------------------------------------------------------------------------

asio::awaitable<void> errors(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  int events = 0;
  Runtime::ProcessListener count = [&events](const ProcessEvent&) {
    ++events;
    return true;
  };

  ProcessConfig empty{};
  REX_CO_EXPECT_THROW(co_await rt.start_process(empty, count), ValueError);

  // What spawn's throw_os_error makes of ENOENT: Python's FileNotFoundError, naming the program.
  ProcessConfig missing{.argv = {"rex-no-such-program-here", "arg"}};
  std::string message;
  bool not_found = false;
  try {
    co_await rt.start_process(missing, count);
    ADD_FAILURE() << "a missing program started";
  } catch (const FileNotFoundError& e) {
    not_found = true;
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected FileNotFoundError, got: " << e.what();
  }
  EXPECT_TRUE(not_found);
  EXPECT_EQ(message, "[Errno 2] No such file or directory: 'rex-no-such-program-here'");
  EXPECT_EQ(events, 0) << "a process that never started has no events";

  ProcessSelector nobody{.pid = 999999};
  REX_CO_EXPECT_THROW(co_await rt.connect_process(nobody, count), ProcessDoesNotExistError);
  ProcessSelector untagged{.tag = "no-such-tag"};
  REX_CO_EXPECT_THROW(co_await rt.connect_process(untagged, count), ProcessDoesNotExistError);
  ProcessSelector neither{};
  REX_CO_EXPECT_THROW(co_await rt.connect_process(neither, count), ValueError);

  // Input for a process without a stdin pipe.
  ProcessConfig config{.argv = {"sleep", "30"}, .tag = "no-stdin"};
  auto sleeper = start_beside(rt, std::move(config), ex);
  auto started = [sleeper] { return sleeper->seen.started_pid() > 0 || sleeper->done; };
  auto wait_started = wait_until(started, "sleep has started");
  co_await std::move(wait_started);
  const long pid = sleeper->seen.started_pid();
  if (pid <= 0) {
    ADD_FAILURE() << "sleep did not start";
    co_return;
  }
  auto find = listed(rt, pid);
  const std::optional<ProcessInfo> info = co_await std::move(find);
  EXPECT_TRUE(info.has_value() && !info->stdin_pipe);
  ProcessInput input{.pid = pid, .data = "hello\n"};
  REX_CO_EXPECT_THROW(co_await rt.send_process_input(input), ValueError);
  ProcessSignal kill{.tag = "no-stdin", .signal = "9"};
  auto signalling = rt.signal_process(std::move(kill));
  co_await std::move(signalling);
  auto ended = end_of(sleeper, "start_process of sleep");
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.signal, 9);
  EXPECT_EQ(events, 0);
}

TEST_P(ProcessesTest, ErrorsHaveTheirTypes) {
  run(errors(rt()));
}

// --- 8. Environment and working directory ---------------------------------------------------

asio::awaitable<void> env_and_cwd(Runtime& rt, std::string dir) {
  EventsSeen seen;
  Runtime::ProcessListener listener = [&seen](const ProcessEvent& e) {
    seen.add(e);
    return true;
  };
  ProcessConfig with_env{.argv = {"bash", "-c", "echo $REX_T:${PATH:+set}"},
                         .env = std::map<std::string, std::string>{{"REX_T", "v"}}};
  auto op = rt.start_process(std::move(with_env), listener);
  const std::optional<ProcessEnd> end = co_await std::move(op);
  EXPECT_EQ(seen.data(Kind::stdout_data), "v:set\n");
  EXPECT_EQ(seen.data(Kind::stderr_data), "");
  EXPECT_TRUE(end && end->exit_code == 0);

  EventsSeen in_dir;
  Runtime::ProcessListener dir_listener = [&in_dir](const ProcessEvent& e) {
    in_dir.add(e);
    return true;
  };
  ProcessConfig with_cwd{.argv = {"pwd"}, .cwd = dir};
  auto op2 = rt.start_process(std::move(with_cwd), std::move(dir_listener));
  const std::optional<ProcessEnd> end2 = co_await std::move(op2);
  EXPECT_EQ(in_dir.data(Kind::stdout_data), dir + "\n");
  EXPECT_TRUE(end2 && end2->exit_code == 0);
}

TEST_P(ProcessesTest, EnvIsAddedAndCwdIsUsed) {
  TempDir dir;
  run(env_and_cwd(rt(), dir.path()));
}

// --- 8b. Processes with a terminal -------------------------------------------------------------

// Waits until a process's output (stdout) holds `text`; fails naming what came instead.
asio::awaitable<void> wait_for_output(std::shared_ptr<Beside> b, std::string text,
                                      Clock::duration within = 10s) {
  auto seen = [b, text] {
    return b->seen.data(Kind::stdout_data).find(text) != std::string::npos || b->done;
  };
  auto wait = wait_until(seen, "the output holds " + text, within);
  co_await std::move(wait);
  if (b->seen.data(Kind::stdout_data).find(text) == std::string::npos)
    throw std::runtime_error("the process ended without printing " + text +
                             "; it printed: " + b->seen.data(Kind::stdout_data));
}

asio::awaitable<void> wait_started(std::shared_ptr<Beside> b) {
  auto started = [b] { return b->seen.started_pid() > 0 || b->done; };
  auto wait = wait_until(started, "the process has started");
  co_await std::move(wait);
  if (b->seen.started_pid() <= 0)
    throw std::runtime_error("the process did not start");
}

asio::awaitable<void> type(Runtime& rt, std::string tag, std::string keys) {
  ProcessInput input{.tag = std::move(tag), .data = std::move(keys)};
  auto write = rt.send_process_input(std::move(input));
  co_await std::move(write);
}

// An interactive bash on a terminal, as a person uses it: the size it was given, typed lines
// echoed, Ctrl-C ending the foreground program only, a resize seen by the next program, exit.
asio::awaitable<void> terminal_shell(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  ProcessConfig config{.argv = {"bash", "--norc", "--noprofile", "-i"},
                       .env = std::map<std::string, std::string>{{"PS1", "prompt$ "}},
                       .tag = "tty",
                       .pty = TerminalSize{.cols = 100, .rows = 30}};
  auto sh = start_beside(rt, std::move(config), ex);
  co_await wait_for_output(sh, "prompt$ ");
  co_await type(rt, "tty", "stty size; tty; echo $TERM\r");
  co_await wait_for_output(sh, "30 100\r\n/dev/pts/");
  co_await wait_for_output(sh, "xterm-256color\r\n");
  EXPECT_NE(sh->seen.data(Kind::stdout_data).find("stty size; tty"), std::string::npos)
      << "the terminal did not echo the typed line";
  EXPECT_EQ(sh->seen.data(Kind::stderr_data), "") << "a terminal's output is all stdout";

  auto find = listed(rt, sh->seen.started_pid());
  const std::optional<ProcessInfo> info = co_await std::move(find);
  EXPECT_TRUE(info && info->pty && info->pty->cols == 100 && info->pty->rows == 30);
  EXPECT_TRUE(info && info->stdin_pipe);

  ProcessResize resize{.tag = "tty", .size = TerminalSize{.cols = 132, .rows = 43}};
  auto resizing = rt.resize_process(std::move(resize));
  co_await std::move(resizing);
  co_await type(rt, "tty", "stty size\r");
  co_await wait_for_output(sh, "43 132\r\n");

  // Ctrl-C once sleep has the terminal (its echo comes before bash starts it); the answer is
  // told from the typed line's echo by the quotes.
  co_await type(rt, "tty", "sleep 100\r");
  const auto bash_pid = static_cast<pid_t>(sh->seen.started_pid());
  auto sleeping = wait_until([bash_pid] { return test::foreground_child(bash_pid, "sleep"); },
                             "sleep in the terminal's foreground");
  co_await std::move(sleeping);
  auto typed_at = Clock::now();
  co_await type(rt, "tty", "\x03");
  co_await type(rt, "tty", "echo still\"\"-here\r");
  co_await wait_for_output(sh, "still-here\r\n");
  EXPECT_LT(seconds_between(typed_at, Clock::now()), 5.0) << "Ctrl-C did not end sleep";
  EXPECT_FALSE(sh->done) << "Ctrl-C ended the shell";

  co_await type(rt, "tty", "exit 7\r");
  auto ended = end_of(sh, "start_process of bash");
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.exit_code, 7);
}

TEST_P(ProcessesTest, ATerminalShellHasItsSizeEchoesTakesCtrlCAndResizes) {
  run(terminal_shell(rt()));
}

// Closing a terminal's input types Ctrl-D: a program reading lines sees end of file.
asio::awaitable<void> terminal_close_is_ctrl_d(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  ProcessConfig config{.argv = {"cat"}, .tag = "tty-cat", .pty = TerminalSize{}};
  auto cat = start_beside(rt, std::move(config), ex);
  co_await wait_started(cat);
  co_await type(rt, "tty-cat", "abc\r");
  co_await wait_for_output(cat, "abc\r\nabc\r\n");  // echoed by the terminal, then by cat
  ProcessInput close{.tag = "tty-cat", .close = true};
  auto closing = rt.send_process_input(std::move(close));
  co_await std::move(closing);
  auto ended = end_of(cat, "start_process of cat");
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.exit_code, 0);
}

TEST_P(ProcessesTest, ClosingATerminalsInputTypesCtrlD) {
  run(terminal_close_is_ctrl_d(rt()));
}

// A terminal whose listener left runs on; one that connects later sees what comes next.
asio::awaitable<void> terminal_detach_and_reattach(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  long pid = 0;
  Runtime::ProcessListener leave_at_start = [&pid](const ProcessEvent& e) {
    if (e.kind == Kind::started)
      pid = e.pid;
    return false;
  };
  ProcessConfig config{.argv = {"cat"}, .tag = "tty-detached", .pty = TerminalSize{}};
  auto start = rt.start_process(std::move(config), std::move(leave_at_start));
  const std::optional<ProcessEnd> left = co_await std::move(start);
  EXPECT_FALSE(left.has_value());
  EXPECT_GT(pid, 0);
  auto again = connect_beside(rt, ProcessSelector{.tag = "tty-detached"}, ex);
  co_await type(rt, "tty-detached", "back\r");
  co_await wait_for_output(again, "back\r\nback\r\n");
  EXPECT_EQ(again->seen.started_pid(), pid);
  ProcessSignal kill{.tag = "tty-detached", .signal = "SIGKILL"};
  auto killing = rt.signal_process(std::move(kill));
  co_await std::move(killing);
  auto ended = end_of(again, "connect_process of cat");
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.signal, SIGKILL);
}

TEST_P(ProcessesTest, ATerminalRunsOnWithoutListenersAndCanBeReattached) {
  run(terminal_detach_and_reattach(rt()));
}

// Output larger than any buffer on the way arrives whole and in order.
asio::awaitable<void> terminal_large_output(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  ProcessConfig config{.argv = {"seq", "1", "200000"}, .pty = TerminalSize{}};
  auto seq = start_beside(rt, std::move(config), ex);
  auto ended = end_of(seq, "start_process of seq", 60s);
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.exit_code, 0);
  const std::string out = seq->seen.data(Kind::stdout_data);
  std::string expected;
  for (int i = 1; i <= 200000; ++i)
    expected += std::to_string(i) + "\r\n";
  EXPECT_EQ(out.size(), expected.size());
  EXPECT_TRUE(out == expected) << "the output differs from seq's";
}

TEST_P(ProcessesTest, ATerminalsLargeOutputArrivesWholeAndInOrder) {
  run(terminal_large_output(rt()), 90s);
}

asio::awaitable<void> terminal_errors(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  ProcessConfig too_small{.argv = {"cat"}, .pty = TerminalSize{.cols = 0, .rows = 24}};
  auto start_bad = rt.start_process(std::move(too_small), [](const ProcessEvent&) { return true; });
  EXPECT_THROW(co_await std::move(start_bad), ValueError);

  ProcessResize nobody{.pid = 999999999, .size = TerminalSize{}};
  auto resize_nobody = rt.resize_process(std::move(nobody));
  EXPECT_THROW(co_await std::move(resize_nobody), ProcessDoesNotExistError);

  ProcessConfig piped{.argv = {"cat"}, .tag = "piped", .stdin_pipe = true};
  auto cat = start_beside(rt, std::move(piped), ex);
  auto started = [cat] { return cat->seen.started_pid() > 0 || cat->done; };
  auto wait_started = wait_until(started, "cat has started");
  co_await std::move(wait_started);
  ProcessResize no_terminal{.tag = "piped", .size = TerminalSize{}};
  auto resize_piped = rt.resize_process(std::move(no_terminal));
  EXPECT_THROW(co_await std::move(resize_piped), ValueError);
  ProcessResize huge{.tag = "piped", .size = TerminalSize{.cols = 80, .rows = 100000}};
  auto resize_huge = rt.resize_process(std::move(huge));
  EXPECT_THROW(co_await std::move(resize_huge), ValueError);
  ProcessInput close{.tag = "piped", .close = true};
  auto closing = rt.send_process_input(std::move(close));
  co_await std::move(closing);
  auto ended = end_of(cat, "start_process of cat");
  co_await std::move(ended);
}

TEST_P(ProcessesTest, TerminalErrorsHaveTheirTypes) {
  run(terminal_errors(rt()));
}

// Many terminals at once, each with its own listener, input and end.
asio::awaitable<void> many_terminals(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  constexpr int kTerminals = 100;
  std::vector<std::shared_ptr<Beside>> cats;
  for (int i = 0; i < kTerminals; ++i) {
    ProcessConfig config{
        .argv = {"cat"}, .tag = "many-" + std::to_string(i), .pty = TerminalSize{}};
    cats.push_back(start_beside(rt, std::move(config), ex));
  }
  for (int i = 0; i < kTerminals; ++i)
    co_await wait_started(cats[i]);
  for (int i = 0; i < kTerminals; ++i)
    co_await type(rt, "many-" + std::to_string(i), "line-" + std::to_string(i) + "\r");
  for (int i = 0; i < kTerminals; ++i)
    co_await wait_for_output(cats[i], "line-" + std::to_string(i) + "\r\nline-", 30s);
  for (int i = 0; i < kTerminals; ++i) {
    ProcessInput close{.tag = "many-" + std::to_string(i), .close = true};
    auto closing = rt.send_process_input(std::move(close));
    co_await std::move(closing);
  }
  for (int i = 0; i < kTerminals; ++i) {
    auto ended = end_of(cats[i], "cat " + std::to_string(i), 30s);
    const ProcessEnd end = co_await std::move(ended);
    EXPECT_EQ(end.exit_code, 0) << "terminal " << i;
  }
  auto list_op = rt.list_processes();
  const ProcessListResponse after = co_await std::move(list_op);
  EXPECT_TRUE(after.processes.empty()) << after.processes.size() << " processes still listed";
}

TEST_P(ProcessesTest, AHundredTerminalsAtOnce) {
  run(many_terminals(rt()), 90s);
}

// --- 10. A bash session's own terminal, lent to a person between its commands ----------------

// The attachment of session `name` running beside the test body; it detaches (its listener
// says so at the next event: a keepalive comes every 0.1 s) once `leave` is set.
struct Attached {
  std::shared_ptr<Beside> b = std::make_shared<Beside>();
  std::shared_ptr<bool> leave = std::make_shared<bool>(false);
};

Attached attach_beside(Runtime& rt, std::string name, const asio::any_io_executor& ex,
                       TerminalSize size = TerminalSize{}) {
  Attached a;
  Runtime::ProcessListener listener = [b = a.b, leave = a.leave](const ProcessEvent& e) {
    b->seen.add(e);
    return !*leave;
  };
  SessionAttach attach{.session = std::move(name), .size = size, .keepalive = 0.1};
  auto op = rt.attach_session(std::move(attach), std::move(listener));
  asio::co_spawn(ex, std::move(op), [b = a.b](std::exception_ptr e, std::optional<ProcessEnd> end) {
    finish_beside(b, e, std::move(end));
  });
  return a;
}

// Lets the attachment go (its listener says so at the next keepalive), waits until it has
// returned, and rethrows its error; its end, which a detach does not have.
asio::awaitable<std::optional<ProcessEnd>> detach(const Attached& a, std::string what) {
  *a.leave = true;
  auto returned = [b = a.b] { return b->done; };
  auto wait = wait_until(returned, what + " returns", 15s);
  co_await std::move(wait);
  if (a.b->error)
    std::rethrow_exception(a.b->error);
  co_return a.b->end;
}

asio::awaitable<void> keys(Runtime& rt, std::string session, std::string typed) {
  SessionInput input{.session = std::move(session), .input = std::move(typed)};
  auto write = rt.send_session_input(std::move(input));
  co_await std::move(write);
}

asio::awaitable<BashObservation> bash_in(Runtime& rt, std::string session, std::string text) {
  BashAction action;
  action.command = std::move(text);
  action.session = std::move(session);
  action.timeout = 10;
  action.check = "silent";
  auto op = rt.run_in_session(Action(std::move(action)));
  co_return co_await std::move(op);
}

asio::awaitable<void> new_session(Runtime& rt, std::string name) {
  CreateBashSessionRequest create;
  create.session = std::move(name);
  auto op = rt.create_session(std::move(create));
  co_await std::move(op);
}

// What an operation threw: its message, or a failure when it threw nothing.
template <class T>
asio::awaitable<std::string> error_of(asio::awaitable<T> op) {
  try {
    co_await std::move(op);
  } catch (const SwerexException& e) {
    co_return std::string(e.what());
  }
  ADD_FAILURE() << "no exception";
  co_return std::string();
}

asio::awaitable<void> lent_and_handed_back(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  co_await new_session(rt, "agent");
  auto before = bash_in(rt, "agent", "cd /tmp && AGENT=kept");
  co_await std::move(before);

  Attached person = attach_beside(rt, "agent", ex, TerminalSize{.cols = 90, .rows = 20});
  co_await wait_for_output(person.b, "(rex) ");
  EXPECT_GT(person.b->seen.started_pid(), 0);
  co_await keys(rt, "agent", "stty size; cd / && PERSON=here\r");
  co_await wait_for_output(person.b, "20 90\r\n");
  EXPECT_NE(person.b->seen.data(Kind::stdout_data).find("cd / && PERSON=here"), std::string::npos)
      << "the terminal did not echo the typed line";

  // Meanwhile the session's commands wait for it.
  auto refused = error_of(bash_in(rt, "agent", "echo no"));
  const std::string busy = co_await std::move(refused);
  EXPECT_NE(busy.find("a terminal is attached"), std::string::npos) << busy;

  SessionResize resize{.session = "agent", .size = TerminalSize{.cols = 120, .rows = 40}};
  auto resizing = rt.resize_session(std::move(resize));
  co_await std::move(resizing);
  co_await keys(rt, "agent", "stty size\r");
  co_await wait_for_output(person.b, "40 120\r\n");

  // Ctrl-D does not end the session; what the person leaves running ends with the attachment.
  co_await keys(rt, "agent", "\x04");
  co_await wait_for_output(person.b, "exit");
  co_await keys(rt, "agent", "sleep 100; echo slept\r");
  co_await wait_for_output(person.b, "sleep 100; echo slept\r\n");
  co_await keys(rt, "agent", "half-typ");
  auto leaving = detach(person, "attach_session, after the detach,");
  const std::optional<ProcessEnd> end = co_await std::move(leaving);
  EXPECT_FALSE(end.has_value()) << "a detach reported an end: " << end->status;

  // The session is back with its commands, with what the person changed and rex's helpers.
  auto after = bash_in(rt, "agent", "echo \"$PWD $AGENT $PERSON\"; type -t less");
  const BashObservation seen = co_await std::move(after);
  EXPECT_EQ(seen.output, "/ kept here\nfunction\n");
  EXPECT_EQ(seen.exit_code, 0);
  auto status = bash_in(rt, "agent", "false");
  const BashObservation failed = co_await std::move(status);
  EXPECT_EQ(failed.exit_code, 1) << "exit codes after the attachment";
  auto multi = bash_in(rt, "agent", "for i in 1 2; do\n echo $i\ndone");
  const BashObservation lines = co_await std::move(multi);
  EXPECT_EQ(lines.output, "1\n2\n");

  // And it can be lent again.
  Attached again = attach_beside(rt, "agent", ex);
  co_await wait_for_output(again.b, "(rex) ");
  auto leaving_again = detach(again, "the second attachment");
  co_await std::move(leaving_again);
  auto last = bash_in(rt, "agent", "echo $PWD");
  const BashObservation last_seen = co_await std::move(last);
  EXPECT_EQ(last_seen.output, "/\n");
}

TEST_P(ProcessesTest, ASessionsTerminalIsLentToAPersonAndHandedBack) {
  run(lent_and_handed_back(rt()), 60s);
}

// A person who types `exit` ends the session: the attachment reports how bash ended.
asio::awaitable<void> person_exits(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  co_await new_session(rt, "leaving");
  Attached person = attach_beside(rt, "leaving", ex);
  co_await wait_for_output(person.b, "(rex) ");
  co_await keys(rt, "leaving", "exit 5\r");
  auto ended = end_of(person.b, "attach_session", 15s);
  const ProcessEnd end = co_await std::move(ended);
  EXPECT_EQ(end.exit_code, 5);
  auto after = error_of(bash_in(rt, "leaving", "echo no"));
  const std::string dead = co_await std::move(after);
  EXPECT_NE(dead.find("exited"), std::string::npos) << dead;
}

TEST_P(ProcessesTest, APersonWhoExitsEndsTheSession) {
  run(person_exits(rt()), 30s);
}

// A stream whose client leaves races the attachment against the client's going (as rex-server's
// /sessions/attach does): the attachment can end on its own (its listener said stop) and be
// cancelled a moment later, in the middle of handing the terminal back. The session must come
// back all the same, every time.
asio::awaitable<void> cancelled_while_handing_back(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  co_await new_session(rt, "raced");
  for (int round = 0; round < 5; ++round) {
    auto gone = std::make_shared<Event>(ex);
    Runtime::ProcessListener listener = [gone](const ProcessEvent& e) {
      if (e.kind == Kind::stdout_data && e.data.find("(rex) ") != std::string::npos) {
        gone->set();
        return false;
      }
      return true;
    };
    SessionAttach attach{.session = "raced"};
    auto lent = rt.attach_session(std::move(attach), std::move(listener));
    auto left = gone->wait();
    auto race = first_of(std::move(lent), std::move(left));
    auto bounded = with_timeout(std::move(race), 15s);
    const bool finished = (co_await std::move(bounded)).has_value();
    EXPECT_TRUE(finished) << "round " << round << ": the attachment did not end";
    if (!finished)
      co_return;
    auto back = bash_in(rt, "raced", "echo back");
    const BashObservation seen = co_await std::move(back);
    EXPECT_EQ(seen.output, "back\n") << "round " << round;
  }
}

TEST_P(ProcessesTest, AnAttachmentCancelledWhileHandingBackStillHandsBack) {
  run(cancelled_while_handing_back(rt()), 120s);
}

// The person leaves while bash still runs a line of theirs that starts a job only later (here
// after half a second of builtins that ignore Ctrl-C, as a slow fork under load does): bash
// seems to have the terminal when the session's prompt line is typed, then the job takes it.
// The session still comes back, the job stopped.
asio::awaitable<void> job_takes_the_terminal_late(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  co_await new_session(rt, "late");
  Attached person = attach_beside(rt, "late", ex);
  co_await wait_for_output(person.b, "(rex) ");
  co_await keys(
      rt, "late",
      "trap '' INT; i=0; while ((i < 300000)); do ((i++)); done; sleep 100; echo slept\r");
  co_await wait_for_output(person.b, "echo slept\r\n");
  auto leaving = detach(person, "attach_session, after the detach,");
  co_await std::move(leaving);
  auto back = bash_in(rt, "late", "trap - INT; echo back");
  const BashObservation seen = co_await std::move(back);
  EXPECT_EQ(seen.output, "back\n");
  auto again = bash_in(rt, "late", "echo $i");
  const BashObservation count = co_await std::move(again);
  EXPECT_EQ(count.output, "300000\n") << "the person's loop ran to its end in the session";
}

TEST_P(ProcessesTest, AJobThatTakesTheTerminalAfterADetachIsStopped) {
  run(job_takes_the_terminal_late(rt()), 60s);
}

asio::awaitable<void> attach_errors(Runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  auto listen = [](const ProcessEvent&) { return true; };
  SessionAttach nobody{.session = "nobody"};
  auto attach_nobody = rt.attach_session(std::move(nobody), listen);
  EXPECT_THROW(co_await std::move(attach_nobody), SessionDoesNotExistError);

  co_await new_session(rt, "busy");
  SessionAttach too_small{.session = "busy", .size = TerminalSize{.cols = 0, .rows = 24}};
  auto attach_small = rt.attach_session(std::move(too_small), listen);
  EXPECT_THROW(co_await std::move(attach_small), ValueError);
  SessionResize unattached{.session = "busy", .size = TerminalSize{}};
  auto resize_unattached = rt.resize_session(std::move(unattached));
  EXPECT_THROW(co_await std::move(resize_unattached), ValueError);

  // A command running: no terminal attaches.
  auto running = std::make_shared<bool>(false);
  asio::co_spawn(ex, bash_in(rt, "busy", "sleep 1"),
                 [running](std::exception_ptr, BashObservation) { *running = false; });
  *running = true;
  auto settle = asio::steady_timer(ex, 200ms);
  co_await settle.async_wait(asio::use_awaitable);
  SessionAttach during{.session = "busy"};
  auto attach_during = error_of(rt.attach_session(std::move(during), listen));
  const std::string refused = co_await std::move(attach_during);
  EXPECT_NE(refused.find("a command is running"), std::string::npos) << refused;
  auto done = [running] { return !*running; };
  auto wait_done = wait_until(done, "sleep 1 ends", 10s);
  co_await std::move(wait_done);

  // One terminal at a time.
  Attached first = attach_beside(rt, "busy", ex);
  co_await wait_for_output(first.b, "(rex) ");
  SessionAttach second{.session = "busy"};
  auto attach_second = error_of(rt.attach_session(std::move(second), listen));
  const std::string taken = co_await std::move(attach_second);
  EXPECT_NE(taken.find("a terminal is attached"), std::string::npos) << taken;
  auto leaving = detach(first, "the attachment");
  co_await std::move(leaving);
}

TEST_P(ProcessesTest, AttachErrorsHaveTheirTypes) {
  run(attach_errors(rt()), 30s);
}

// --- 9. A LocalRuntime destroyed with a process running ---------------------------------------

asio::awaitable<long> start_and_leave(Runtime& rt, std::vector<std::string> argv) {
  long pid = 0;
  Runtime::ProcessListener stop_at_start = [&pid](const ProcessEvent& e) {
    if (e.kind == Kind::started)
      pid = e.pid;
    return false;
  };
  ProcessConfig config{.argv = std::move(argv)};
  auto op = rt.start_process(std::move(config), std::move(stop_at_start));
  const std::optional<ProcessEnd> end = co_await std::move(op);
  EXPECT_FALSE(end.has_value());
  co_return pid;
}

// True once kill(pid, 0) fails with ESRCH (not even a zombie is left), checking every 5 ms for
// at most `within`; `between` runs before each check.
bool gone_within(
    pid_t pid, std::chrono::milliseconds within, const std::function<void()>& between = [] {}) {
  const auto until = Clock::now() + within;
  while (true) {
    between();
    if (::kill(pid, 0) != 0 && errno == ESRCH)
      return true;
    if (Clock::now() > until)
      return false;
    std::this_thread::sleep_for(5ms);
  }
}

TEST(ProcessesLocalRuntime, DestroyingItKillsItsRunningProcesses) {
  asio::io_context io;
  auto runtime = std::make_unique<LocalRuntime>(io.get_executor());
  const long pid = test::run_async(io, start_and_leave(*runtime, {"sleep", "30"}), 10s);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(test::process_running(static_cast<pid_t>(pid)));
  const auto listed_pids = test::run_async(io, runtime->list_processes(), 10s);
  ASSERT_EQ(listed_pids.processes.size(), 1u);

  runtime.reset();
  // Killed at once: not running any more (a zombie until reaped counts as ended here) ...
  const auto until = Clock::now() + 1s;
  while (test::process_running(static_cast<pid_t>(pid)) && Clock::now() < until)
    std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(test::process_running(static_cast<pid_t>(pid))) << "sleep runs on";
  // ... and reaped once the io_context runs what is left of its reader. (Not before: the
  // table's destructor only sends SIGKILL; until the io_context runs the reader, or is
  // destroyed, the killed child stays a zombie and kill(pid, 0) still succeeds.)
  EXPECT_TRUE(gone_within(static_cast<pid_t>(pid), 1000ms,
                          [&io] {
                            io.restart();
                            io.poll();
                          }))
      << "pid " << pid << " still exists (a zombie?)";
}

// --- The rex-server executable stopped with a process running -------------------------------

// On SIGTERM rex-server closes its runtime, which ends its background processes: it exits at
// once, not when the last of them ends by itself.
TEST(ProcessesRexServer, SigtermStopsTheServerAndItsRunningProcesses) {
  const std::string binary = rex_server_binary();
  ASSERT_FALSE(binary.empty())
      << "no rex-server executable: build the rex-server target or set REX_SERVER_PATH";
  asio::io_context io;
  RexServerProcess server(binary);
  long pid = 0;
  {
    RemoteRuntime remote(io.get_executor(), server.config());
    test::run_async(io, remote.wait_until_alive(10s), 15s);
    pid = test::run_async(io, start_and_leave(remote, {"sleep", "30"}), 10s);
  }
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(test::process_running(static_cast<pid_t>(pid)));
  const auto start = Clock::now();
  const bool exited = server.stop(5s);
  EXPECT_TRUE(exited) << "rex-server did not exit within 5 s of SIGTERM while a process ran; "
                         "log:\n"
                      << server.log();
  if (exited) {
    EXPECT_TRUE(WIFEXITED(server.status()) && WEXITSTATUS(server.status()) == 0)
        << "status " << server.status() << " after " << seconds_between(start, Clock::now())
        << " s; log:\n"
        << server.log();
  }
  // Its process went with it (not a child of ours: a zombie left to init counts as ended).
  const auto until = Clock::now() + 1s;
  while (test::process_running(static_cast<pid_t>(pid)) && Clock::now() < until)
    std::this_thread::sleep_for(5ms);
  const bool still_running = test::process_running(static_cast<pid_t>(pid));
  EXPECT_FALSE(still_running) << "sleep (pid " << pid << ") outlived rex-server";
  if (still_running)
    ::kill(static_cast<pid_t>(-pid), SIGKILL);
}

}  // namespace
}  // namespace rex
