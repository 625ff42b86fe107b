// The conformance tests (conformance.hpp): each runs against every runtime an executable
// instantiates the suite with. Paths on the runtime's side are made through the runtime, so the
// same tests run against a runtime whose file system is not this process's.
#include "conformance/conformance.hpp"

#include <rex/protocol/exceptions.hpp>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "support/async_test.hpp"
#include "support/sanitizers.hpp"
#include "support/test_helpers.hpp"

namespace rex::test {

std::ostream& operator<<(std::ostream& os, const RuntimeFactory& factory) {
  return os << factory.name;
}

namespace {

using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

BashAction cmd(std::string command, std::optional<double> timeout = 10.0) {
  BashAction a;
  a.command = std::move(command);
  a.timeout = timeout;
  return a;
}

BashAction interactive(std::string command, std::string expect, double timeout = 10.0) {
  BashAction a = cmd(std::move(command), timeout);
  a.is_interactive_command = true;
  a.expect.push_back(std::move(expect));
  return a;
}

BashAction quit(std::string command, double timeout = 10.0) {
  BashAction a = cmd(std::move(command), timeout);
  a.is_interactive_quit = true;
  return a;
}

BashInterruptAction interrupt_action(std::string session = "default") {
  BashInterruptAction a;
  a.session = std::move(session);
  a.timeout = 2.0;  // a generous bound; a working interrupt returns in milliseconds
  return a;
}

BashAction interactive_in(std::string session, std::string command, std::string expect) {
  BashAction a = interactive(std::move(command), std::move(expect));
  a.session = std::move(session);
  return a;
}

BashAction quit_in(std::string session, std::string command) {
  BashAction a = quit(std::move(command));
  a.session = std::move(session);
  return a;
}

CreateBashSessionRequest session_named(std::string name) {
  CreateBashSessionRequest r;
  r.session = std::move(name);
  r.startup_timeout = 10.0;
  return r;
}

// ---- the runtime's side, reached through the runtime -----------------------------------------

// Runs `argv` as a one-off process of the runtime; its stdout. A non-zero exit is an error.
asio::awaitable<std::string> run_argv(Runtime& rt, std::vector<std::string> argv) {
  Command c;
  c.error_msg = "on the runtime's side: " + argv.front();
  c.command = std::move(argv);
  c.check = true;
  c.timeout = 30.0;
  co_return (co_await rt.execute(c)).stdout_;
}

// Runs a /bin/sh script as a one-off process of the runtime; its stdout.
asio::awaitable<std::string> run_sh(Runtime& rt, std::string script) {
  std::vector<std::string> argv = {"/bin/sh", "-c", std::move(script)};
  co_return co_await run_argv(rt, std::move(argv));
}

asio::awaitable<void> write_remote(Runtime& rt, std::string path, std::string content) {
  WriteFileRequest w;
  w.path = std::move(path);
  w.content = std::move(content);
  co_await rt.write_file(w);
}

// A one-off process of the runtime is a child of the runtime's process (the rex server, or this
// process for a local runtime), so a script it runs sees that process as $PPID. It prints the
// number of that process's children other than the script itself (zombies included) and of its
// open descriptors.
constexpr const char* kRuntimeProcessCensus = R"sh(
server=$PPID
children=$(sed -n 's/^\([0-9]*\) .*) . \([0-9]*\) .*/\1 \2/p' /proc/[0-9]*/stat 2>/dev/null |
  while read -r pid ppid; do
    if [ "$ppid" = "$server" ] && [ "$pid" != "$$" ]; then echo "$pid"; fi
  done | wc -l)
fds=$(ls /proc/$server/fd | wc -l)
echo "$children $fds"
)sh";

struct RuntimeProcessCensus {
  std::size_t children = 0;
  std::size_t fds = 0;
};

asio::awaitable<RuntimeProcessCensus> runtime_process_census(Runtime& rt) {
  std::string script = kRuntimeProcessCensus;
  std::istringstream out(co_await run_sh(rt, std::move(script)));
  RuntimeProcessCensus census;
  if (!(out >> census.children >> census.fds))
    throw std::runtime_error("the process census printed no counts: " + out.str());
  co_return census;
}

// Polls runtime_process_census until it equals `want` or `bound` passes; returns the last one.
asio::awaitable<RuntimeProcessCensus> poll_runtime_process_census(Runtime& rt,
                                                                  RuntimeProcessCensus want,
                                                                  Clock::duration bound = 5s) {
  const auto until = Clock::now() + bound;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    const RuntimeProcessCensus census = co_await runtime_process_census(rt);
    if ((census.children == want.children && census.fds == want.fds) || Clock::now() >= until)
      co_return census;
    pause.expires_after(20ms);
    co_await pause.async_wait(asio::use_awaitable);
  }
}

// Processes on the runtime's side that still run (zombies have ended) and either carry
// `marker` (NAME=value, letters, digits and '_' only) in their environment or have one of
// `pids`: one "pid" line each. (No grep -F: busybox's stops at the first NUL of a line.)
asio::awaitable<std::string> runtime_leftovers(Runtime& rt, std::string marker,
                                               std::vector<int> pids) {
  std::string script = "marker='" + marker + "'\nfor p in";
  for (int pid : pids)
    script += " " + std::to_string(pid);
  script += R"sh( $(grep -l -e "$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
  state=$(sed 's/.*) \(.\).*/\1/' /proc/$p/stat 2>/dev/null) || continue
  case $state in ''|Z|X) ;; *) echo "$p" ;; esac
done
)sh";
  co_return co_await run_sh(rt, std::move(script));
}

// Polls runtime_leftovers until it finds some (`want_some`) or none, or `bound` passes; returns
// the last answer. Neither is instant: a background job carries its environment only once it
// has exec'd, and SIGKILL takes effect soon after kill() returns, not at once.
asio::awaitable<std::string> poll_runtime_leftovers(Runtime& rt, std::string marker,
                                                    std::vector<int> pids, bool want_some,
                                                    Clock::duration bound = 5s) {
  const auto until = Clock::now() + bound;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (;;) {
    std::string left = co_await runtime_leftovers(rt, marker, pids);
    if (left.empty() != want_some || Clock::now() >= until)
      co_return left;
    pause.expires_after(20ms);
    co_await pause.async_wait(asio::use_awaitable);
  }
}

std::string random_marker() {
  std::random_device rd;
  std::ostringstream s;
  s << "REX_CONFORMANCE_MARK=" << std::hex << rd() << rd();
  return s.str();
}

// ---- this process ------------------------------------------------------------------------------

// Processes (zombies included) whose parent is this test process.
std::size_t child_process_count() {
  std::size_t n = 0;
  const std::string self = std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator("/proc")) {
    const auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line))
      continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid == self)
      ++n;
  }
  return n;
}

asio::awaitable<void> remove_remote_dirs(Runtime& rt, std::vector<std::string> dirs) {
  std::vector<std::string> argv = {"rm", "-rf", "--"};
  argv.insert(argv.end(), dirs.begin(), dirs.end());
  co_await run_argv(rt, std::move(argv));
}

}  // namespace

// ---- the fixture
// ---------------------------------------------------------------------------------

void RuntimeConformance::SetUp() {
  runtime_ = GetParam().make(io_);
}

void RuntimeConformance::TearDown() {
  if (!runtime_)
    return;
  if (!remote_dirs_.empty()) {
    try {
      test::run_async(io_, remove_remote_dirs(*runtime_, remote_dirs_));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "removing the test's directories on the runtime's side: " << e.what();
    }
  }
  test::run_async(io_, runtime_->close());
  runtime_.reset();
}

void RuntimeConformance::run(std::function<asio::awaitable<void>(Runtime&)> body,
                             std::chrono::seconds deadline) {
  test::run_async(io_, body(*runtime_), deadline);
}

asio::awaitable<std::string> RuntimeConformance::remote_temp_dir(Runtime& runtime) {
  std::vector<std::string> argv = {"mktemp", "-d", "/tmp/rex-conformance-XXXXXX"};
  const std::string printed = co_await run_argv(runtime, std::move(argv));
  std::string dir = printed;
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r'))
    dir.pop_back();
  if (dir.empty() || dir.front() != '/' || dir.find('\n') != std::string::npos)
    throw std::runtime_error("mktemp -d on the runtime's side printed no directory: " + printed);
  remote_dirs_.push_back(dir);
  co_return dir;
}

// ---- the tests
// -----------------------------------------------------------------------------------

// 1. State persists across commands.
TEST_P(RuntimeConformance, StatePersistsAcrossCommands) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    co_await rt.run_in_session(cmd("cd /tmp && export REX_X=42 && REX_LOCAL=7"));
    co_await rt.run_in_session(cmd("greet() { echo \"hello $1\"; }"));
    co_await rt.run_in_session(cmd("alias say='echo said'"));
    co_await rt.run_in_session(cmd("shopt -s extglob; set -o pipefail"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("pwd"))).output, "/tmp\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $REX_X $REX_LOCAL"))).output, "42 7\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("greet rex"))).output, "hello rex\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("say it"))).output, "said it\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("shopt -q extglob && [[ -o pipefail ]] && echo on")))
                  .output,
              "on\n");
    // Shell options that make the framing fail loudly if it used an unset name.
    co_await rt.run_in_session(cmd("set -u"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo nounset"))).output, "nounset\n");
    co_await rt.run_in_session(cmd("sleep 0.01 & wait; set +u"));
    co_await rt.run_in_session(cmd("declare -A map=([k]=v); declare -i num=5"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo ${map[k]} $num"))).output, "v 5\n");
  });
}

// 1b. A session's state (directory, variables, functions, aliases, options, umask, an activated
// virtual environment) is captured and recreated in a new session; a session whose foreground
// program still runs is named, not carried.
TEST_P(RuntimeConformance, SessionStateCarriesToANewSession) {
  run([this](Runtime& rt) -> asio::awaitable<void> {
    const std::string dir = co_await remote_temp_dir(rt);
    co_await rt.create_session(session_named("default"));
    co_await rt.run_in_session(cmd("mkdir -p " + dir + "/venv/bin " + dir + "/work && cd " + dir +
                                   "/work && export REX_X='two words' && REX_LOCAL=$'a\\nb'"));
    // What an activate script leaves behind: its variables, its PATH and its function.
    co_await rt.run_in_session(
        cmd("VIRTUAL_ENV=" + dir +
            "/venv; export VIRTUAL_ENV; _OLD_VIRTUAL_PATH=$PATH; PATH=$VIRTUAL_ENV/bin:$PATH; "
            "export PATH; deactivate() { PATH=$_OLD_VIRTUAL_PATH; unset VIRTUAL_ENV; }"));
    co_await rt.run_in_session(cmd("greet() { echo \"hello $1\"; }; export -f greet"));
    co_await rt.run_in_session(cmd("alias say='echo said'; shopt -s extglob; set -o pipefail"));
    co_await rt.run_in_session(
        cmd("declare -A map=([k]='v w'); declare -ia nums=(1 2); umask 027"));
    // PAGER comes with every session's environment: its unset carries over too.
    co_await rt.run_in_session(cmd("unset PAGER; cd .. && cd work"));
    const std::string old_path =
        (co_await rt.run_in_session(cmd("echo ${_OLD_VIRTUAL_PATH%%:*}"))).output;
    co_await rt.create_session(session_named("repl"));
    co_await rt.run_in_session(interactive_in("repl", "python3 -q", ">>> "));

    const CaptureSessionsResponse captured = co_await rt.capture_sessions({});
    EXPECT_EQ(captured.sessions.size(), 1u);
    EXPECT_EQ(captured.not_carried.size(), 1u);
    if (captured.sessions.size() != 1 || captured.not_carried.size() != 1)
      co_return;
    EXPECT_EQ(captured.sessions[0].session, "default");
    EXPECT_EQ(captured.sessions[0].cwd, dir + "/work");
    EXPECT_EQ(captured.not_carried[0].session, "repl");
    EXPECT_THAT(captured.not_carried[0].reason, HasSubstr("interactive program"));
    // The captured session goes on as it was.
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $REX_X; pwd"))).output,
              "two words\n" + dir + "/work\n");

    // A name in use is refused before anything starts.
    RestoreSessionsRequest taken{.sessions = captured.sessions};
    REX_CO_EXPECT_THROW(co_await rt.restore_sessions(taken), SessionExistsError);
    CaptureSessionsRequest unknown{.sessions = {"nobody"}};
    REX_CO_EXPECT_THROW(co_await rt.capture_sessions(unknown), SessionDoesNotExistError);

    RestoreSessionsRequest again{.sessions = captured.sessions};
    again.sessions[0].session = "copy";
    const RestoreSessionsResponse restored = co_await rt.restore_sessions(again);
    EXPECT_EQ(restored.sessions.size(), 1u);
    if (!restored.sessions.empty()) {
      EXPECT_EQ(restored.sessions[0].output, "") << "restoring printed something";
    }
    auto in_copy = [](std::string command) {
      BashAction a = cmd(std::move(command));
      a.session = "copy";
      return a;
    };
    EXPECT_EQ((co_await rt.run_in_session(in_copy("pwd; echo \"$REX_X|$REX_LOCAL\""))).output,
              dir + "/work\ntwo words|a\nb\n");
    EXPECT_EQ((co_await rt.run_in_session(in_copy("greet rex; bash -c 'greet child'"))).output,
              "hello rex\nhello child\n");
    EXPECT_EQ(
        (co_await rt.run_in_session(in_copy("say it; umask; echo ${map[k]} ${nums[1]}"))).output,
        "said it\n0027\nv w 2\n");
    EXPECT_EQ((co_await rt.run_in_session(
                   in_copy("shopt -q extglob && [[ -o pipefail ]] && echo on; echo ${PAGER-no}; "
                           "cd - >/dev/null; pwd")))
                  .output,
              "on\nno\n" + dir + "\n");
    EXPECT_EQ((co_await rt.run_in_session(
                   in_copy("echo ${PATH%%:*}; deactivate; echo ${VIRTUAL_ENV-none} ${PATH%%:*}")))
                  .output,
              dir + "/venv/bin\nnone " + old_path);
    // The copy is a session of its own from now on.
    co_await rt.run_in_session(in_copy("export REX_X=copy"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $REX_X"))).output, "two words\n");
    co_await rt.run_in_session(quit_in("repl", "exit()"));
  });
}

// 2. Exit codes and the three check modes.
TEST_P(RuntimeConformance, ExitCodesFollowCheckMode) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("true"))).exit_code, 0);

    BashAction raise = cmd("echo out; (exit 3)");
    raise.error_msg = "setup failed";
    try {
      co_await rt.run_in_session(raise);
      ADD_FAILURE() << "expected NonZeroExitCodeError";
    } catch (const NonZeroExitCodeError& e) {
      EXPECT_THAT(e.what(), HasSubstr("setup failed: "));
      EXPECT_THAT(e.what(), HasSubstr("exit code 3"));
      EXPECT_THAT(e.what(), HasSubstr("out"));
    }

    BashAction silent = cmd("false");
    silent.check = "silent";
    EXPECT_EQ((co_await rt.run_in_session(silent)).exit_code, 1);
    BashAction ignore = cmd("exit_with() { return $1; }; exit_with 4");
    ignore.check = "ignore";
    auto obs = co_await rt.run_in_session(ignore);
    EXPECT_FALSE(obs.exit_code.has_value());
    // $? of the previous command is visible to the next one, like at a terminal.
    silent.command = "echo $?";
    EXPECT_EQ((co_await rt.run_in_session(silent)).output, "4\n");
    silent.command = "sh -c 'kill -TERM $$'";
    EXPECT_EQ((co_await rt.run_in_session(silent)).exit_code, 128 + SIGTERM);
  });
}

// 3. Any bash text runs as one unit and returns one observation.
TEST_P(RuntimeConformance, AnyTextRunsAsOneUnit) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    auto out = [&](std::string c) -> asio::awaitable<std::string> {
      co_return (co_await rt.run_in_session(cmd(std::move(c)))).output;
    };
    EXPECT_EQ(co_await out("echo one\necho two\necho three"), "one\ntwo\nthree\n");
    EXPECT_EQ(co_await out("cat <<EOF\nheredoc $((1+2))\nEOF"), "heredoc 3\n");
    EXPECT_EQ(co_await out("cat <<'A'\nfirst $HOME\nA\ncat <<B\nsecond\nB\necho after"),
              "first $HOME\nsecond\nafter\n");
    EXPECT_EQ(
        co_await out("cat <<EOF > /tmp/rex-heredoc-$$.txt\nline\nEOF\ncat /tmp/rex-heredoc-$$.txt; "
                     "rm /tmp/rex-heredoc-$$.txt"),
        "line\n");
    EXPECT_EQ(co_await out("echo a \\\n  b \\\n  c"), "a b c\n");
    EXPECT_EQ(co_await out("echo 'quoted\nacross lines'"), "quoted\nacross lines\n");
    EXPECT_EQ(co_await out("echo $((1+2))"), "3\n");
    EXPECT_EQ(co_await out("for i in 1 2 3; do\n  echo \"n=$i\"\ndone"), "n=1\nn=2\nn=3\n");
    EXPECT_EQ(co_await out("if true; then echo yes; else echo no; fi"), "yes\n");
    EXPECT_EQ(co_await out("# only a comment"), "");
    EXPECT_EQ(co_await out(""), "");
    EXPECT_EQ(co_await out("   \n\n  # two comments\n#"), "");
    EXPECT_EQ(co_await out("printf 'no newline'"), "no newline");
    EXPECT_EQ(co_await out("echo \"tab\there\" 'single \"q\"' \"dq 'x'\""),
              "tab\there single \"q\" dq 'x'\n");
    EXPECT_EQ(co_await out("printf '%s\\n' \"$(printf 'a\\x01b' | od -An -c | tr -s ' ')\""),
              " a 001 b\n");
    std::string long_text = "echo " + std::string(20000, 'x');
    EXPECT_EQ((co_await out(long_text)).size(), 20001u);
    // Control characters inside the text never reach the terminal as keys.
    EXPECT_EQ(co_await out("echo 'a\x03"
                           "b\x04"
                           "c' | od -An -tx1 | tr -s ' '"),
              " 61 03 62 04 63 0a\n");
  });
}

// 4. A syntax error is reported, runs nothing, and leaves the session usable.
TEST_P(RuntimeConformance, SyntaxErrorRunsNothing) {
  run([this](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    const std::string dir = co_await remote_temp_dir(rt);
    const std::string marker = dir + "/syntax";
    const std::vector<std::string> bad = {
        "touch " + marker + "-1; echo )",     "touch " + marker + "-2\nif true; then\necho never",
        "touch " + marker + "-3\necho ok\n)", "echo \"unterminated; touch " + marker + "-4",
        "touch " + marker + "-5; }",
    };
    for (const auto& text : bad) {
      try {
        co_await rt.run_in_session(cmd(text));
        ADD_FAILURE() << "no syntax error for: " << text;
      } catch (const BashIncorrectSyntaxError& e) {
        EXPECT_THAT(e.what(), testing::AnyOf(HasSubstr("syntax error"), HasSubstr("unexpected")))
            << text;
        const auto* err = e.extra_info().if_contains("bash_stderr");
        EXPECT_TRUE(err && err->is_string());
        const std::string text = err && err->is_string() ? std::string(err->as_string()) : "";
        EXPECT_THAT(text, Not(HasSubstr("__rex")));
      }
    }
    auto obs = co_await rt.run_in_session(cmd("ls " + marker + "-* 2>/dev/null | wc -l"));
    EXPECT_EQ(obs.output, "0\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo still fine"))).output, "still fine\n");
  });
}

// 5. Output that looks like a prompt or a marker never ends a command early.
TEST_P(RuntimeConformance, PromptLookalikesDoNotEndCommands) {
  run([this](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    co_await rt.create_session(session_named("other"));
    BashAction other = cmd("true");
    other.session = "other";
    const std::string other_marker = (co_await rt.run_in_session(other)).expect_string;
    EXPECT_FALSE(other_marker.empty());

    const std::string dir = co_await remote_temp_dir(rt);
    const std::string file = dir + "/marker";
    WriteFileRequest w;
    w.path = file;
    w.content = other_marker + ":1:0;\n" + other_marker + ":1:0;";
    co_await rt.write_file(w);
    auto obs = co_await rt.run_in_session(cmd("cat " + file + "; echo; echo end; rm " + file));
    EXPECT_EQ(obs.output, w.content + "\nend\n");
    obs = co_await rt.run_in_session(cmd("echo SHELLPS1PREFIX; echo 'REXPS1:1:0;'; echo done"));
    EXPECT_EQ(obs.output, "SHELLPS1PREFIX\nREXPS1:1:0;\ndone\n");
    obs =
        co_await rt.run_in_session(cmd("set | grep -c . >/dev/null; env | wc -l | tr -d ' '; "
                                       "echo \"$PS1\" | wc -l"));
    EXPECT_THAT(obs.output, testing::EndsWith("\n1\n"));
    EXPECT_EQ(obs.exit_code, 0);
    // The session's own prompt, expanded as bash prints it: once, twice, without a newline, and
    // back to back, every observation is its own command's (none ends early, none lags one
    // command behind).
    const std::vector<std::string> printings{"printf '%s\\n' \"${PS1@P}\"",
                                             "printf '%s' \"${PS1@P}\"",
                                             "printf '%s\\n%s\\n' \"${PS1@P}\" \"${PS1@P}\""};
    for (int round = 0; round < 10; ++round) {
      for (const std::string& printing : printings) {
        const std::string end = "round-" + std::to_string(round);
        obs = co_await rt.run_in_session(cmd(printing + "; echo " + end));
        EXPECT_THAT(obs.output, testing::EndsWith(end + "\n")) << printing;
        EXPECT_EQ(obs.exit_code, 0);
      }
    }
    // A command that changes the prompt (as a virtualenv's activate does) or adds a
    // PROMPT_COMMAND does not disturb the next observations.
    co_await rt.run_in_session(cmd("PS1=\"(venv) $PS1\"; PROMPT_COMMAND='echo noise'; PS0='pre '"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo clean"))).output, "clean\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo again"))).output, "again\n");
  });
}

// 6. Timeout: the error carries the output so far; an interrupt recovers the session.
TEST_P(RuntimeConformance, TimeoutThenInterruptRecovers) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    try {
      co_await rt.run_in_session(cmd("echo started; sleep 1000", 0.5));
      ADD_FAILURE() << "expected a timeout";
    } catch (const CommandTimeoutError& e) {
      const auto* output = e.extra_info().if_contains("output");
      EXPECT_TRUE(output && output->is_string() && output->as_string() == "started\n");
      EXPECT_THAT(e.what(), HasSubstr("timeout after 0.5 seconds"));
    }
    // Still running: a new command is refused with a clear error, not queued behind it.
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(cmd("echo no")), SessionBusyError);
    auto obs = co_await rt.run_in_session(interrupt_action());
    EXPECT_EQ(obs.exit_code, 0);
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo back"))).output, "back\n");

    BashAction quiet = cmd("echo tick; sleep 1000", 30.0);
    quiet.no_output_timeout = 0.4;
    const auto t0 = Clock::now();
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(quiet), CommandTimeoutError);
    EXPECT_LT(Clock::now() - t0, 10s);
    co_await rt.run_in_session(interrupt_action());
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo again"))).output, "again\n");
  });
}

// 7. Interrupt stops sleep, a busy python loop, and a program that ignores SIGINT.
TEST_P(RuntimeConformance, InterruptStopsForegroundJobs) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    const std::vector<std::string> jobs = {
        "sleep 1000",
        "python3 -c 'while True: pass'",
        "python3 -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "time.sleep(1000)'",
        "bash -c 'trap \"\" INT; sleep 1000'",
    };
    for (const auto& job : jobs) {
      REX_CO_EXPECT_THROW(co_await rt.run_in_session(cmd(job, 0.3)), CommandTimeoutError);
      const auto t0 = Clock::now();
      auto obs = co_await rt.run_in_session(interrupt_action());
      EXPECT_EQ(obs.exit_code, 0) << job;
      EXPECT_LT(Clock::now() - t0, 3s) << job;
      EXPECT_EQ((co_await rt.run_in_session(cmd("echo ok"))).output, "ok\n") << job;
    }
  });
}

// 7b. An interrupt reaches a command that is still running (no timeout) from another request.
TEST_P(RuntimeConformance, InterruptReachesRunningCommand) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    auto ex = co_await asio::this_coro::executor;
    auto interrupter = [&rt, ex]() -> asio::awaitable<BashObservation> {
      asio::steady_timer t(ex, 300ms);
      co_await t.async_wait(asio::use_awaitable);
      co_return co_await rt.run_in_session(interrupt_action());
    };
    BashAction long_job = cmd("echo begin; sleep 1000", std::nullopt);
    long_job.check = "silent";
    auto [job, intr] = co_await (rt.run_in_session(long_job) && interrupter());
    EXPECT_THAT(job.output, testing::StartsWith("begin\n"));
    EXPECT_EQ(job.exit_code, 128 + SIGINT);
    EXPECT_EQ(intr.exit_code, 0);
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo after"))).output, "after\n");
  });
}

// 8. Interactive programs: python3 and gdb, then ordinary commands again.
TEST_P(RuntimeConformance, InteractivePrograms) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    co_await rt.run_in_session(interactive("python3 -q", ">>> "));
    auto obs = co_await rt.run_in_session(interactive("print(6 * 7)", ">>> "));
    EXPECT_EQ(obs.output, "42");
    EXPECT_EQ(obs.expect_string, ">>> ");
    EXPECT_EQ(obs.exit_code, 0);
    co_await rt.run_in_session(interactive("x = 5", ">>> "));
    obs = co_await rt.run_in_session(interactive("print(x + 1)", ">>> "));
    EXPECT_EQ(obs.output, "6");
    // While python holds the terminal, a plain command is refused clearly.
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(cmd("echo nope")), SessionBusyError);
    obs = co_await rt.run_in_session(quit("exit()"));
    EXPECT_EQ(obs.exit_code, 0);
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo shell"))).output, "shell\n");
    BashAction f = cmd("false");
    f.check = "silent";
    EXPECT_EQ((co_await rt.run_in_session(f)).exit_code, 1);

    co_await rt.run_in_session(interactive("gdb -q -nx", "(gdb) "));
    obs = co_await rt.run_in_session(interactive("print 6*7", "(gdb) "));
    EXPECT_THAT(obs.output, HasSubstr("$1 = 42"));
    co_await rt.run_in_session(quit("quit"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo after gdb"))).output, "after gdb\n");

    // pdb.
    co_await rt.run_in_session(
        interactive("python3 -q -c 'import pdb; pdb.set_trace()'", "(Pdb) "));
    obs = co_await rt.run_in_session(interactive("p 2 ** 10", "(Pdb) "));
    EXPECT_THAT(obs.output, HasSubstr("1024"));
    co_await rt.run_in_session(quit("q"));
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo after pdb"))).output, "after pdb\n");
  });
}

// 9. startup_source files run at start, even ones that change the prompt or print text.
TEST_P(RuntimeConformance, StartupSourceAndTimeout) {
  run([this](Runtime& rt) -> asio::awaitable<void> {
    // The files are the runtime's: bash reads them on its side.
    const std::string dir = co_await remote_temp_dir(rt);
    const std::string rc_path = dir + "/rc.sh";
    const std::string slow_path = dir + "/slow.sh";
    const std::string rc =
        "echo hello from rc\nPS1='custom> '\nPROMPT_COMMAND='echo noise'\nexport FROM_RC=yes\n"
        "export PAGER=more\n";
    const std::string slow_rc = "sleep 30\n";
    co_await write_remote(rt, rc_path, rc);
    co_await write_remote(rt, slow_path, slow_rc);
    CreateBashSessionRequest req = session_named("default");
    req.startup_source = {rc_path};
    auto created = co_await rt.create_session(req);
    EXPECT_EQ(created.output, "hello from rc\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $FROM_RC"))).output, "yes\n");
    // User files may override rex's pager defaults.
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $PAGER $GIT_PAGER"))).output, "more cat\n");

    CreateBashSessionRequest slow = session_named("slow");
    slow.startup_source = {slow_path};
    slow.startup_timeout = 0.5;
    const auto t0 = Clock::now();
    REX_CO_EXPECT_THROW(co_await rt.create_session(slow), PexpectTimeout);
    EXPECT_LT(Clock::now() - t0, 5s);
    // The failed session is gone and its name can be used again.
    slow.startup_source.clear();
    slow.startup_timeout = 10;
    co_await rt.create_session(slow);
  });
}

// 10. Output cleaning, large output, and the optional cap.
TEST_P(RuntimeConformance, OutputIsCleaned) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    auto out = [&](std::string c) -> asio::awaitable<std::string> {
      co_return (co_await rt.run_in_session(cmd(std::move(c)))).output;
    };
    EXPECT_EQ(co_await out("printf '\\033[31mred\\033[0m plain\\r\\n'"), "red plain\n");
    EXPECT_EQ(co_await out("printf '\\033[?2004hpaste\\033[?2004l\\n'"), "paste\n");
    EXPECT_EQ(co_await out("printf '\\033]0;title\\007text\\n'"), "text\n");
    EXPECT_EQ(co_await out("printf 'bad \\xff\\xfe end\\n'"), "bad \\xff\\xfe end\n");
    EXPECT_EQ(co_await out("printf 'caf\\xc3\\xa9\\n'"), "caf\xc3\xa9\n");
    EXPECT_EQ(co_await out("printf 'progress 1\\rprogress 2\\n'"), "progress 1\rprogress 2\n");

    // 10 MB (2 MB under the sanitizers, where the E2B path cleans it in three instrumented
    // processes).
    constexpr std::size_t kBig = REX_TEST_SANITIZED ? 2'000'000 : 10'000'000;
    auto big = co_await out(fmt::format("head -c {} /dev/zero | tr '\\0' 'a'; echo", kBig));
    EXPECT_EQ(big.size(), kBig + 1);

    BashAction capped = cmd("seq 1 200000");
    capped.max_output_bytes = 4000;
    auto obs = co_await rt.run_in_session(capped);
    EXPECT_LT(obs.output.size(), 4300u);
    EXPECT_THAT(obs.output, testing::StartsWith("1\n2\n3\n"));
    EXPECT_THAT(obs.output, testing::EndsWith("199999\n200000\n"));
    EXPECT_THAT(obs.output, HasSubstr("bytes of output omitted"));
    EXPECT_EQ(obs.exit_code, 0);
  });
}

// 10b. 100 MB stream through while another session stays responsive. Sanitizer builds send
// 20 MB: the E2B path relays it through three instrumented processes, which takes ThreadSanitizer
// over two minutes for 100 MB; the property (the other session is served meanwhile) is the same.
constexpr std::size_t kHugeOutput = REX_TEST_SANITIZED ? 20'000'000 : 100'000'000;

TEST_P(RuntimeConformance, HugeOutputDoesNotStallOtherSessions) {
  const int wanted = answers_while_streaming();
  run(
      [wanted](Runtime& rt) -> asio::awaitable<void> {
        co_await rt.create_session(session_named("big"));
        co_await rt.create_session(session_named("small"));
        bool big_done = false;
        auto big = [&]() -> asio::awaitable<std::size_t> {
          BashAction a =
              cmd(fmt::format("head -c {} /dev/zero | tr '\\0' 'b'", kHugeOutput), 120.0);
          a.session = "big";
          auto obs = co_await rt.run_in_session(a);
          big_done = true;
          co_return obs.output.size();
        };
        // The other session is pinged while the output streams (up to 200 times): its
        // answers come meanwhile, not after the stream. How many fit depends on the path's
        // round trip (a fraction of a millisecond locally, a tenth of a second through a
        // validating proxy), so each runtime's factory says how many it must answer.
        auto small = [&]() -> asio::awaitable<int> {
          int finished_before_big = 0;
          for (int i = 0; i < 200 && !big_done; ++i) {
            BashAction a = cmd("echo ping");
            a.session = "small";
            auto obs = co_await rt.run_in_session(a);
            EXPECT_EQ(obs.output, "ping\n");
            if (!big_done)
              ++finished_before_big;
          }
          co_return finished_before_big;
        };
        auto [size, before] = co_await (big() && small());
        EXPECT_EQ(size, kHugeOutput);
        EXPECT_GE(before, wanted) << "the other session was not answered while the output "
                                     "streamed";
      },
      180s);
}

// 11. Programs waiting for stdin time out cleanly; an interrupt recovers the session.
TEST_P(RuntimeConformance, StdinReadersTimeOutAndRecover) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    const std::vector<std::string> readers = {"cat", "read x", "python3 -c 'input()'"};
    for (const auto& reader : readers) {
      REX_CO_EXPECT_THROW(co_await rt.run_in_session(cmd(reader, 0.3)), CommandTimeoutError);
      co_await rt.run_in_session(interrupt_action());
      EXPECT_EQ((co_await rt.run_in_session(cmd("echo fine"))).output, "fine\n") << reader;
    }
  });
}

// 12. Pagers never wait for a key press.
TEST_P(RuntimeConformance, PagersNeverHang) {
  const bool shares_host = this->shares_host();
  run([shares_host](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    // A container image may lack git or less (Debian's minbase has neither); a program that is
    // not there cannot page. This machine's must all be there.
    const std::string found =
        (co_await rt.run_in_session(cmd("for p in git less more; do command -v $p >/dev/null && "
                                        "printf '%s ' $p; done; echo")))
            .output;
    const bool git = found.find("git ") != std::string::npos;
    const bool less = found.find("less ") != std::string::npos;
    const bool more = found.find("more ") != std::string::npos;
    if (shares_host) {
      EXPECT_EQ(found, "git less more \n");
    }
    std::string text = "d=$(mktemp -d) && cd $d && ";
    std::string expected;
    if (git) {
      text +=
          "git init -q && git -c user.name=r -c user.email=r@x commit -q --allow-empty -m "
          "first && git log --format=%s; ";
      expected += "first\n";
    }
    text += "seq 1 500 > f; ";
    if (less) {
      text += "less f | tail -1; ";
      expected += "500\n";
    }
    if (more) {
      text += "more -d f | wc -l; ";
      expected += "500\n";
    }
    if (less) {
      text += "less < f | head -1; ";
      expected += "1\n";
    }
    text += "cd / && rm -rf $d";
    auto obs = co_await rt.run_in_session(cmd(text));
    EXPECT_EQ(obs.output, expected);
    obs = co_await rt.run_in_session(
        cmd("if command -v man >/dev/null; then man bash | head -c 1 | wc -c; else echo 1; fi"));
    EXPECT_EQ(obs.output, "1\n");
  });
}

// 13. Background jobs do not block, and their later output or completion notices do not
// corrupt the next observation.
TEST_P(RuntimeConformance, BackgroundJobsStayOutOfTheWay) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    const auto t0 = Clock::now();
    co_await rt.run_in_session(cmd("sleep 100 &"));
    co_await rt.run_in_session(cmd("nohup sleep 100 >/dev/null 2>&1 &"));
    EXPECT_LT(Clock::now() - t0, 5s);
    // Let jobs end and print while the shell is idle: neither their output nor bash's notice
    // of their end belongs to the next command.
    co_await rt.run_in_session(cmd("sleep 0.05 &"));
    co_await rt.run_in_session(cmd("(sleep 0.1; echo late) &"));
    asio::steady_timer t(co_await asio::this_coro::executor, 500ms);
    co_await t.async_wait(asio::use_awaitable);
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo next"))).output, "next\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("sleep 0.01; echo y"))).output, "y\n");
  });
}

// 14. exit, or bash killed: clear errors, the session can be closed, others are unaffected.
TEST_P(RuntimeConformance, DeadShellIsReportedAndClosable) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    co_await rt.create_session(session_named("doomed"));
    co_await rt.create_session(session_named("killed"));
    BashAction ex = cmd("exit 3");
    ex.session = "doomed";
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(ex), SessionDiedError);
    ex.command = "echo hello";
    try {
      co_await rt.run_in_session(ex);
      ADD_FAILURE() << "expected SessionDiedError";
    } catch (const SessionDiedError& e) {
      EXPECT_THAT(e.what(), HasSubstr("exited with status 3"));
    }
    BashAction kill = cmd("kill -9 $$");
    kill.session = "killed";
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(kill), SessionDiedError);
    kill.command = "echo hello";
    try {
      co_await rt.run_in_session(kill);
      ADD_FAILURE() << "expected SessionDiedError";
    } catch (const SessionDiedError& e) {
      EXPECT_THAT(e.what(), HasSubstr("signal 9"));
    }
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo alive"))).output, "alive\n");
    CloseBashSessionRequest close;
    close.session = "doomed";
    co_await rt.close_session(close);
    close.session = "killed";
    co_await rt.close_session(close);
    REX_CO_EXPECT_THROW(co_await rt.close_session(close), SessionDoesNotExistError);
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(kill), SessionDoesNotExistError);
    REX_CO_EXPECT_THROW(co_await rt.create_session(session_named("default")), SessionExistsError);
  });
}

// 15. Sessions are independent; hundreds run at once on one io_context thread.
TEST_P(RuntimeConformance, SessionsAreIndependent) {
  run(
      [](Runtime& rt) -> asio::awaitable<void> {
        co_await rt.create_session(session_named("slow"));
        co_await rt.create_session(session_named("fast"));
        bool slow_done = false;
        auto slow = [&]() -> asio::awaitable<void> {
          BashAction a = cmd("sleep 2; echo slow");
          a.session = "slow";
          co_await rt.run_in_session(a);
          slow_done = true;
        };
        auto fast = [&]() -> asio::awaitable<bool> {
          for (int i = 0; i < 10; ++i) {
            BashAction a = cmd("echo fast");
            a.session = "fast";
            co_await rt.run_in_session(a);
          }
          co_return !slow_done;
        };
        const bool fast_first = co_await (slow() && fast());
        EXPECT_TRUE(fast_first);

        constexpr int kSessions = 200;
        auto one = [&](int i) -> asio::awaitable<void> {
          const std::string name = "s" + std::to_string(i);
          co_await rt.create_session(session_named(name));
          for (int k = 0; k < 3; ++k) {
            BashAction a = cmd("echo " + std::to_string(i * 10 + k));
            a.session = name;
            auto obs = co_await rt.run_in_session(a);
            EXPECT_EQ(obs.output, std::to_string(i * 10 + k) + "\n");
          }
          CloseBashSessionRequest c;
          c.session = name;
          co_await rt.close_session(c);
        };
        auto ex = co_await asio::this_coro::executor;
        int remaining = kSessions;
        asio::steady_timer all_done(ex, Clock::time_point::max());
        for (int i = 0; i < kSessions; ++i) {
          asio::co_spawn(ex, one(i), [&](std::exception_ptr e) {
            if (e)
              ADD_FAILURE() << "session failed";
            if (--remaining == 0)
              all_done.cancel();
          });
        }
        co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
        EXPECT_EQ(remaining, 0);
      },
      120s);
}

// 16. close_session and close leave no process, no zombie and no open descriptor behind: on
// the runtime's side (seen through the runtime), and in this process when the runtime's
// processes are this process's children.
TEST_P(RuntimeConformance, CloseLeavesNothingBehind) {
  // One session and one census first, so the io_context's own descriptors (epoll, eventfd) and
  // whatever a one-off process needs already exist.
  RuntimeProcessCensus census_before;
  run([&](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("warm-up"));
    CloseBashSessionRequest c;
    c.session = "warm-up";
    co_await rt.close_session(c);
    census_before = co_await runtime_process_census(rt);
  });
  const std::size_t fds_before = open_fd_count();
  const std::size_t children_before = child_process_count();
  // Every job the sessions start carries this in its environment, so the runtime's side can
  // be searched for survivors.
  const std::string marker = random_marker();
  const std::string mark = "export " + marker + "; ";
  std::vector<int> job_pids;
  run(
      [&](Runtime& rt) -> asio::awaitable<void> {
        for (int i = 0; i < 100; ++i) {
          co_await rt.create_session(session_named("cycle"));
          BashAction a = cmd(mark + "sleep 1000 & nohup sleep 1000 >/dev/null 2>&1 & echo $!");
          a.session = "cycle";
          auto obs = co_await rt.run_in_session(a);
          // The last line is the pid; bash's job notices ("[1] 123") come before it.
          const auto last = obs.output.find_last_of('\n', obs.output.size() - 2);
          if (i % 10 == 0)
            job_pids.push_back(std::stoi(obs.output.substr(last + 1)));
          CloseBashSessionRequest c;
          c.session = "cycle";
          co_await rt.close_session(c);
        }
        co_await rt.create_session(session_named("a"));
        co_await rt.create_session(session_named("b"));
        BashAction in_a = cmd(mark + "sleep 1000 &");
        in_a.session = "a";
        co_await rt.run_in_session(in_a);
        // The search finds a job that runs, so finding none below means something.
        const std::vector<int> no_pids;
        EXPECT_NE(co_await poll_runtime_leftovers(rt, marker, no_pids, true), "");
        co_await rt.close();

        EXPECT_EQ(co_await poll_runtime_leftovers(rt, marker, job_pids, false), "");
        // Like the leftovers, a killed session's processes end (and are reaped) soon after
        // close() returns, not at once: poll the census, bounded.
        const RuntimeProcessCensus after = co_await poll_runtime_process_census(rt, census_before);
        EXPECT_EQ(after.children, census_before.children) << "children of the runtime's process";
        EXPECT_EQ(after.fds, census_before.fds) << "descriptors of the runtime's process";
      },
      120s);
  // Only this process's own: the runtime's processes are checked through the runtime above.
  if (!shares_host())
    return;
  EXPECT_EQ(open_fd_count(), fds_before);
  EXPECT_EQ(child_process_count(), children_before);
  for (int pid : job_pids)
    EXPECT_FALSE(process_running(pid)) << pid;
}

TEST_P(RuntimeConformance, UnknownSessionsAndDuplicatesAreErrors) {
  run([](Runtime& rt) -> asio::awaitable<void> {
    BashAction a = cmd("echo x");
    a.session = "missing";
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(a), SessionDoesNotExistError);
    REX_CO_EXPECT_THROW(co_await rt.run_in_session(interrupt_action("missing")),
                        SessionDoesNotExistError);
    co_await rt.create_session(session_named("dup"));
    REX_CO_EXPECT_THROW(co_await rt.create_session(session_named("dup")), SessionExistsError);
    EXPECT_TRUE((co_await rt.is_alive()).is_alive);
  });
}

TEST_P(RuntimeConformance, FilesRoundTrip) {
  const std::string content = "h\xc3\xa9llo\nworld\n";
  // Upload copies from this side: its source is a local directory.
  const TempDir local;
  fs::create_directories(local.path() + "/nested/deeper");
  local.file("nested/deeper/file.txt", content);
  run([&](Runtime& rt) -> asio::awaitable<void> {
    const std::string dir = co_await remote_temp_dir(rt);
    WriteFileRequest w;
    w.path = dir + "/nested/deeper/file.txt";
    w.content = content;
    co_await rt.write_file(w);
    ReadFileRequest r;
    r.path = w.path;
    EXPECT_EQ((co_await rt.read_file(r)).content, w.content);
    r.encoding = "latin-1";
    EXPECT_EQ((co_await rt.read_file(r)).content, "h\xc3\x83\xc2\xa9llo\nworld\n");
    r.path = dir + "/missing";
    REX_CO_EXPECT_THROW(co_await rt.read_file(r), FileNotFoundError);

    UploadRequest up;
    up.source_path = local.path() + "/nested";
    up.target_path = dir + "/copy";
    co_await rt.upload(up);
    r.path = dir + "/copy/deeper/file.txt";
    r.encoding.reset();
    EXPECT_EQ((co_await rt.read_file(r)).content, w.content);

    Command c;
    c.command = std::vector<std::string>{"cat", dir + "/copy/deeper/file.txt"};
    EXPECT_EQ((co_await rt.execute(c)).stdout_, w.content);
  });
}

TEST_P(RuntimeConformance, DownloadCopiesFilesAndTrees) {
  // The tree to download is the runtime's; the targets are this side's.
  const TempDir local;
  run([&](Runtime& rt) -> asio::awaitable<void> {
    const std::string remote = co_await remote_temp_dir(rt);
    const std::string file = remote + "/file.txt";
    const std::string top = remote + "/tree/top.txt";
    const std::string deep = remote + "/tree/sub/deep.txt";
    const std::string file_text = "file\n", top_text = "top\n", deep_text = "deep\n";
    co_await write_remote(rt, file, file_text);
    co_await write_remote(rt, top, top_text);
    co_await write_remote(rt, deep, deep_text);
    std::vector<std::string> link = {"ln", "-s", "top.txt", remote + "/tree/link"};
    co_await run_argv(rt, std::move(link));

    DownloadRequest d;
    d.path = file;
    d.target_path = local.path() + "/new/parents/file.txt";
    co_await rt.download(d);
    d.path = remote + "/tree";
    d.target_path = local.path() + "/tree-copy";
    co_await rt.download(d);
    d.path = remote + "/missing";
    d.target_path = local.path() + "/missing";
    REX_CO_EXPECT_THROW(co_await rt.download(d), FileNotFoundError);
  });
  const auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(slurp(local.path() + "/new/parents/file.txt"), "file\n");
  EXPECT_EQ(slurp(local.path() + "/tree-copy/top.txt"), "top\n");
  EXPECT_EQ(slurp(local.path() + "/tree-copy/sub/deep.txt"), "deep\n");
  EXPECT_TRUE(fs::is_symlink(local.path() + "/tree-copy/link"));
  EXPECT_EQ(fs::read_symlink(local.path() + "/tree-copy/link"), "top.txt");
  // Nothing else: no temporary file left beside the targets.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(local.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"new", "tree-copy"}));
  EXPECT_EQ(std::distance(fs::directory_iterator(local.path() + "/new/parents"),
                          fs::directory_iterator()),
            1);
}

}  // namespace rex::test
