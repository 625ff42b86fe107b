// The behaviour every Runtime must show, run against real bash in a real pty. The suite is
// parameterised over runtime factories, so other runtimes run exactly the same checks.
#include <rex/http/server.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct RuntimeFactory {
  std::string name;
  std::function<std::unique_ptr<Runtime>(asio::io_context&)> make;
};

std::ostream& operator<<(std::ostream& os, const RuntimeFactory& f) {
  return os << f.name;
}

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

CreateBashSessionRequest session_named(std::string name) {
  CreateBashSessionRequest r;
  r.session = std::move(name);
  r.startup_timeout = 10.0;
  return r;
}

using test::open_fd_count;
using test::TempDir;

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

// True while `pid` runs. A killed process that is not our child may stay a zombie until init
// reaps it; it has ended all the same.
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' &&
         line[close + 2] != 'X';
}

class RuntimeConformance : public ::testing::TestWithParam<RuntimeFactory> {
 protected:
  void SetUp() override { runtime_ = GetParam().make(io_); }
  void TearDown() override {
    if (runtime_) {
      test::run_async(io_, runtime_->close());
      runtime_.reset();
    }
  }

  // Runs a test body on the io_context under a deadline.
  void run(std::function<asio::awaitable<void>(Runtime&)> body,
           std::chrono::seconds deadline = 60s) {
    test::run_async(io_, body(*runtime_), deadline);
  }

  asio::io_context io_;
  std::unique_ptr<Runtime> runtime_;
};

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
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    const std::string marker = "/tmp/rex-syntax-" + std::to_string(::getpid());
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
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    co_await rt.create_session(session_named("other"));
    BashAction other = cmd("true");
    other.session = "other";
    const std::string other_marker = (co_await rt.run_in_session(other)).expect_string;
    EXPECT_FALSE(other_marker.empty());

    const std::string file = "/tmp/rex-marker-" + std::to_string(::getpid());
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
  const TempDir temp;
  const std::string& dir = temp.path();
  {
    std::ofstream rc(dir + "/rc.sh");
    rc << "echo hello from rc\nPS1='custom> '\nPROMPT_COMMAND='echo noise'\nexport FROM_RC=yes\n"
          "export PAGER=more\n";
    std::ofstream slow(dir + "/slow.sh");
    slow << "sleep 30\n";
  }
  run([&](Runtime& rt) -> asio::awaitable<void> {
    CreateBashSessionRequest req = session_named("default");
    req.startup_source = {dir + "/rc.sh"};
    auto created = co_await rt.create_session(req);
    EXPECT_EQ(created.output, "hello from rc\n");
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $FROM_RC"))).output, "yes\n");
    // User files may override rex's pager defaults.
    EXPECT_EQ((co_await rt.run_in_session(cmd("echo $PAGER $GIT_PAGER"))).output, "more cat\n");

    CreateBashSessionRequest slow = session_named("slow");
    slow.startup_source = {dir + "/slow.sh"};
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

    auto big = co_await out("head -c 10000000 /dev/zero | tr '\\0' 'a'; echo");
    EXPECT_EQ(big.size(), 10000001u);

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

// 10b. 100 MB stream through while another session stays responsive.
TEST_P(RuntimeConformance, HugeOutputDoesNotStallOtherSessions) {
  run(
      [](Runtime& rt) -> asio::awaitable<void> {
        co_await rt.create_session(session_named("big"));
        co_await rt.create_session(session_named("small"));
        bool big_done = false;
        auto big = [&]() -> asio::awaitable<std::size_t> {
          BashAction a = cmd("head -c 100000000 /dev/zero | tr '\\0' 'b'", 120.0);
          a.session = "big";
          auto obs = co_await rt.run_in_session(a);
          big_done = true;
          co_return obs.output.size();
        };
        auto small = [&]() -> asio::awaitable<int> {
          int finished_before_big = 0;
          for (int i = 0; i < 20; ++i) {
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
        EXPECT_EQ(size, 100000000u);
        EXPECT_EQ(before, 20);
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
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("default"));
    auto obs = co_await rt.run_in_session(
        cmd("d=$(mktemp -d) && cd $d && git init -q && git -c user.name=r -c user.email=r@x commit "
            "-q --allow-empty -m first && git log --format=%s; seq 1 500 > f; less f | tail -1; "
            "more -d f | wc -l; less < f | head -1; cd / && rm -rf $d"));
    EXPECT_EQ(obs.output, "first\n500\n500\n1\n");
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

// 16. close_session and close leave no process, no zombie and no open descriptor behind.
TEST_P(RuntimeConformance, CloseLeavesNothingBehind) {
  // One session first, so the io_context's own descriptors (epoll, eventfd) already exist.
  run([](Runtime& rt) -> asio::awaitable<void> {
    co_await rt.create_session(session_named("warm-up"));
    CloseBashSessionRequest c;
    c.session = "warm-up";
    co_await rt.close_session(c);
  });
  const std::size_t fds_before = open_fd_count();
  const std::size_t children_before = child_process_count();
  std::vector<int> job_pids;
  run(
      [&](Runtime& rt) -> asio::awaitable<void> {
        for (int i = 0; i < 100; ++i) {
          co_await rt.create_session(session_named("cycle"));
          BashAction a = cmd("sleep 1000 & nohup sleep 1000 >/dev/null 2>&1 & echo $!");
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
        BashAction in_a = cmd("sleep 1000 &");
        in_a.session = "a";
        co_await rt.run_in_session(in_a);
        co_await rt.close();
      },
      120s);
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
  const TempDir temp;
  const std::string& dir = temp.path();
  run([&](Runtime& rt) -> asio::awaitable<void> {
    WriteFileRequest w;
    w.path = dir + "/nested/deeper/file.txt";
    w.content = "h\xc3\xa9llo\nworld\n";
    co_await rt.write_file(w);
    ReadFileRequest r;
    r.path = w.path;
    EXPECT_EQ((co_await rt.read_file(r)).content, w.content);
    r.encoding = "latin-1";
    EXPECT_EQ((co_await rt.read_file(r)).content, "h\xc3\x83\xc2\xa9llo\nworld\n");
    r.path = dir + "/missing";
    REX_CO_EXPECT_THROW(co_await rt.read_file(r), FileNotFoundError);

    UploadRequest up;
    up.source_path = dir + "/nested";
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
  const TempDir remote;
  const TempDir local;
  remote.file("file.txt", "file\n");
  fs::create_directories(remote.path() + "/tree/sub");
  remote.file("tree/top.txt", "top\n");
  remote.file("tree/sub/deep.txt", "deep\n");
  fs::create_symlink("top.txt", remote.path() + "/tree/link");
  run([&](Runtime& rt) -> asio::awaitable<void> {
    DownloadRequest d;
    d.path = remote.path() + "/file.txt";
    d.target_path = local.path() + "/new/parents/file.txt";
    co_await rt.download(d);
    d.path = remote.path() + "/tree";
    d.target_path = local.path() + "/tree-copy";
    co_await rt.download(d);
    d.path = remote.path() + "/missing";
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

const RuntimeFactory kLocal{"Local", [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                              return std::make_unique<LocalRuntime>(io.get_executor());
                            }};

// A RemoteRuntime talking to a rex Server over a LocalRuntime, all on the test's io_context:
// the whole wire path, in process.
class ServedRuntime final : public Runtime {
 public:
  // `socket_dir` (may be null) holds the server's unix socket; it goes after everything else.
  ServedRuntime(asio::io_context& io, http::ServerConfig server_config,
                std::unique_ptr<TempDir> socket_dir = nullptr)
      : socket_dir_(std::move(socket_dir)),
        io_(io),
        local_(io.get_executor()),
        server_(io.get_executor(), local_, server_config) {
    server_.listen();
    asio::co_spawn(io, server_.run(), [this](std::exception_ptr e) {
      server_error_ = e;
      server_done_ = true;
    });
    RemoteRuntimeConfig cfg;
    cfg.url = server_.url();
    cfg.auth_token = server_config.auth_token;
    remote_.emplace(io.get_executor(), cfg);
  }

  ~ServedRuntime() override {
    remote_.reset();
    server_.stop();
    const auto until = Clock::now() + 10s;
    io_.restart();
    while (!server_done_ && Clock::now() < until)
      io_.run_one_for(10ms);
    EXPECT_TRUE(server_done_) << "the server did not stop";
    if (server_error_) {
      try {
        std::rethrow_exception(server_error_);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "server: " << e.what();
      }
    }
  }

  asio::awaitable<IsAliveResponse> is_alive() override { return remote_->is_alive(); }
  asio::awaitable<CreateBashSessionResponse> create_session(CreateBashSessionRequest r) override {
    return remote_->create_session(std::move(r));
  }
  asio::awaitable<BashObservation> run_in_session(Action a) override {
    return remote_->run_in_session(std::move(a));
  }
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest r) override {
    return remote_->close_session(std::move(r));
  }
  asio::awaitable<CommandResponse> execute(Command c) override {
    return remote_->execute(std::move(c));
  }
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest r) override {
    return remote_->read_file(std::move(r));
  }
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest r) override {
    return remote_->write_file(std::move(r));
  }
  asio::awaitable<UploadResponse> upload(UploadRequest r) override {
    return remote_->upload(std::move(r));
  }
  asio::awaitable<DownloadResponse> download(DownloadRequest r) override {
    return remote_->download(std::move(r));
  }
  asio::awaitable<CloseResponse> close() override { return remote_->close(); }

 private:
  std::unique_ptr<TempDir> socket_dir_;
  asio::io_context& io_;
  LocalRuntime local_;
  http::Server server_;
  std::optional<RemoteRuntime> remote_;
  std::exception_ptr server_error_;
  bool server_done_ = false;
};

const RuntimeFactory kRemoteTcp{"RemoteTcp", [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                  http::ServerConfig cfg;
                                  cfg.host = "127.0.0.1";
                                  cfg.port = 0;
                                  cfg.auth_token = "conformance";
                                  return std::make_unique<ServedRuntime>(io, cfg);
                                }};

const RuntimeFactory kRemoteUnix{"RemoteUnix",
                                 [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                   auto dir = std::make_unique<TempDir>();
                                   http::ServerConfig cfg;
                                   cfg.unix_socket = dir->path() + "/rex.sock";
                                   return std::make_unique<ServedRuntime>(io, cfg, std::move(dir));
                                 }};

INSTANTIATE_TEST_SUITE_P(Runtimes, RuntimeConformance,
                         ::testing::Values(kLocal, kRemoteTcp, kRemoteUnix),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex
