// CommandMachine driven from terminal transcripts and a fake clock: no shell, no terminal.
#include "session/command_machine.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rex {
namespace {

using namespace std::chrono_literals;
using Kind = CommandMachine::Action::Kind;
using Stop = CommandMachine::Stop;
using TimePoint = CommandMachine::TimePoint;

constexpr TimePoint kNoDeadline = TimePoint::max();
const TimePoint t0 = TimePoint{} + 1000s;
const std::vector<std::string> kNone{};

struct CommandMachineTest : ::testing::Test {
  ShellFraming framing{"f"};  // prompts are REXPS1f:<number>:<status>:<jobs>;
  CommandMachine m{framing};

  // Sends `line` and reports the write done; the machine then reads.
  void deliver(const std::string& line, bool direct, std::uint64_t number,
               const std::vector<std::string>& expect = kNone, TimePoint deadline = kNoDeadline,
               std::optional<CommandMachine::Clock::duration> idle = std::nullopt) {
    auto a = m.begin_command(line, direct, expect, number, deadline, idle);
    ASSERT_EQ(a.kind, Kind::write);
    EXPECT_EQ(a.bytes, line);
    a = m.on_written(t0);
    ASSERT_EQ(a.kind, Kind::read);
  }

  // The output before the prompt that ended the operation.
  std::string output() const { return m.raw().substr(0, m.outcome().match.begin); }
};

TEST_F(CommandMachineTest, DirectCommandEndsAtItsPromptWithTheExitStatus) {
  const std::string line = "echo hello\n";
  deliver(line, true, 11);
  const auto a = m.on_bytes("hello\r\nworld\r\nREXPS1f:12:0:0;", t0);
  ASSERT_EQ(a.kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::prompt);
  EXPECT_EQ(m.outcome().match.command_number, 12u);
  EXPECT_EQ(m.outcome().match.status, 0);
  EXPECT_TRUE(m.direct());
  EXPECT_EQ(output(), "hello\r\nworld\r\n");
}

TEST_F(CommandMachineTest, ReportsExitStatusAndJobs) {
  deliver("false\n", true, 6);
  ASSERT_EQ(m.on_bytes("\x1b[?2004l\rREXPS1f:7:127:2;", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().match.status, 127);
  EXPECT_EQ(m.outcome().match.jobs, 2);
}

TEST_F(CommandMachineTest, OutputThatLooksLikeAPromptDoesNotEndTheCommand) {
  deliver("cat fake\n", true, 4);
  // Other nonces, missing fields and overlong numbers are output, not prompts.
  EXPECT_EQ(m.on_bytes("REXPS1g:5:0:0; REXPS1f:x:0:0; REXPS1f:1:0 ", t0).kind, Kind::read);
  EXPECT_EQ(m.on_bytes("REXPS1f:99999999999999999999:0:0;", t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("REXPS1f:5:0:1;", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().match.command_number, 5u);
  EXPECT_EQ(m.outcome().match.jobs, 1);
  EXPECT_EQ(output(),
            "REXPS1g:5:0:0; REXPS1f:x:0:0; REXPS1f:1:0 REXPS1f:99999999999999999999:0:0;");
}

TEST_F(CommandMachineTest, PromptSplitAcrossReads) {
  deliver("ls\n", true, 1);
  const std::string transcript = "a b c\r\nREXPS1f:2:0:0;";
  for (std::size_t i = 0; i + 1 < transcript.size(); ++i)
    ASSERT_EQ(m.on_bytes(transcript.substr(i, 1), t0).kind, Kind::read) << i;
  ASSERT_EQ(m.on_bytes(transcript.substr(transcript.size() - 1), t0).kind, Kind::finished);
  EXPECT_EQ(output(), "a b c\r\n");
  EXPECT_EQ(m.outcome().match.command_number, 2u);
}

TEST_F(CommandMachineTest, EvalDeliveryDropsContinuationPromptsAndReportsRejection) {
  deliver("__rex_ran=;eval $'echo )';__rex_e\n", false, 2);
  // The eval line's continuation lines each bring a continuation prompt; bash counted the line.
  EXPECT_EQ(m.on_bytes("REXPS1f:3;REXPS1f:3;bash: syntax error\r\n", t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("REXPS1f!REXPS1f:3:2:0;", t0).kind, Kind::finished);
  EXPECT_TRUE(m.outcome().match.rejected);
  EXPECT_EQ(m.outcome().match.status, 2);
  EXPECT_EQ(output(), "bash: syntax error\r\n");
}

TEST_F(CommandMachineTest, IncompleteDirectLineIsDroppedCheckedAndSentThroughEval) {
  deliver("echo 'unterminated\n", true, 4);
  // Bash waits for the rest of the line: Ctrl-C drops it.
  auto a = m.on_bytes("REXPS1f:4;", t0);
  ASSERT_EQ(a.kind, Kind::write);
  EXPECT_EQ(a.bytes, "\x03");
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  a = m.on_bytes("^C\r\nREXPS1f:4:130:0;", t0);
  ASSERT_EQ(a.kind, Kind::check_syntax);
  EXPECT_EQ(a.prompt.status, 130);
  EXPECT_TRUE(m.raw().empty());  // the dropped line's echo is not the command's output
  const std::string eval_line = "__rex_ran=;eval $'echo \\'unterminated';__rex_e\n";
  a = m.on_syntax_ok(eval_line);
  ASSERT_EQ(a.kind, Kind::write);
  EXPECT_EQ(a.bytes, eval_line);
  EXPECT_FALSE(m.direct());
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("bash: unexpected EOF\r\nREXPS1f!REXPS1f:5:2:0;", t0).kind, Kind::finished);
  EXPECT_TRUE(m.outcome().match.rejected);
  EXPECT_EQ(output(), "bash: unexpected EOF\r\n");
}

TEST_F(CommandMachineTest, RejectedDirectLineIsConfirmedWithAnEmptyLine) {
  deliver("echo )\n", true, 8);
  // The command number did not grow: an empty line brings a current prompt.
  auto a = m.on_bytes("bash: syntax error near unexpected token `)'\r\nREXPS1f:8:2:0;", t0);
  ASSERT_EQ(a.kind, Kind::write);
  EXPECT_EQ(a.bytes, "\n");
  EXPECT_EQ(m.raw(), "bash: syntax error near unexpected token `)'\r\n");  // stale one removed
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("REXPS1f:8:2:0;", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().match.command_number, 8u);  // BashSession: nothing ran
  EXPECT_EQ(output(), "bash: syntax error near unexpected token `)'\r\n");
}

TEST_F(CommandMachineTest, StalePromptAfterEvalIsReplacedByACurrentOne) {
  deliver("__rex_ran=;eval $'printf \"%s\" \"${PS1@P}\"';__rex_e\n", false, 20);
  // Output that reproduces a prompt of the current number, then bash's stale one.
  ASSERT_EQ(m.on_bytes("xREXPS1f:20:0:0;", t0).kind, Kind::write);
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  // Still the old number: removed, and the wait goes on until one that grew.
  EXPECT_EQ(m.on_bytes("REXPS1f:20:0:0;", t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("REXPS1f:21:0:0;", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().match.command_number, 21u);
  EXPECT_EQ(output(), "x");
}

TEST_F(CommandMachineTest, ExpectStringForAnInteractiveProgram) {
  const std::vector<std::string> expect{">>> "};
  deliver("python3\n", true, 3, expect);
  EXPECT_EQ(m.on_bytes("Python 3.11.2 (main)\r\n>", t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes(">> ", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::expect);
  EXPECT_EQ(m.outcome().expect_index, 0u);
  EXPECT_EQ(m.raw().substr(0, m.outcome().expect_pos), "Python 3.11.2 (main)\r\n");

  // Input for the program, then its way out back to the prompt.
  m.forget(m.outcome().expect_pos + 4);
  auto a = m.begin_input("print(6*7)\n", expect, kNoDeadline, std::nullopt);
  ASSERT_EQ(a.kind, Kind::write);
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("print(6*7)\r\n42\r\n>>> ", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::expect);
  m.forget(m.outcome().expect_pos + 4);
  ASSERT_EQ(m.begin_input("exit()\n", expect, kNoDeadline, std::nullopt).kind, Kind::write);
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("exit()\r\nREXPS1f:4:0:0;", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::prompt);
}

TEST_F(CommandMachineTest, TheEarliestOfPromptAndExpectWins) {
  const std::vector<std::string> expect{"never", "done"};
  deliver("echo done\n", true, 1, expect);
  ASSERT_EQ(m.on_bytes("REXPS1f:2:0:0;done", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::prompt);
}

TEST_F(CommandMachineTest, DeadlinePasses) {
  auto a = m.begin_command("sleep 9\n", true, kNone, 1, t0 + 5s, std::nullopt);
  ASSERT_EQ(a.kind, Kind::write);
  a = m.on_written(t0);
  ASSERT_EQ(a.kind, Kind::read);
  EXPECT_TRUE(a.arm);
  EXPECT_EQ(a.until, t0 + 5s);
  a = m.on_bytes("partial\r\n", t0 + 1s);
  ASSERT_EQ(a.kind, Kind::read);
  EXPECT_FALSE(a.arm);  // one timer serves the whole wait
  EXPECT_FALSE(m.expired());
  EXPECT_EQ(m.on_timer(t0 + 5s), std::nullopt);
  EXPECT_TRUE(m.expired());
  ASSERT_EQ(m.on_expired().kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::timeout);
  EXPECT_EQ(m.raw(), "partial\r\n");  // kept for the error's output
}

TEST_F(CommandMachineTest, IdleLimitMovesWithOutput) {
  auto a = m.begin_command("tail -f log\n", true, kNone, 1, t0 + 60s, 2s);
  a = m.on_written(t0);
  ASSERT_EQ(a.kind, Kind::read);
  EXPECT_EQ(a.until, t0 + 2s);
  EXPECT_TRUE(m.needs_clock());
  ASSERT_EQ(m.on_bytes("line\r\n", t0 + 1s).kind, Kind::read);
  // The timer fires at the first limit; output came since, so it is re-armed.
  EXPECT_EQ(m.on_timer(t0 + 2s), t0 + 3s);
  EXPECT_FALSE(m.expired());
  EXPECT_EQ(m.on_timer(t0 + 3s), std::nullopt);
  ASSERT_EQ(m.on_expired().kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::idle);
}

TEST_F(CommandMachineTest, InterruptEscalatesFromCtrlCToKill) {
  auto a = m.begin_interrupt(kNone, 0, 3, 1s);
  ASSERT_EQ(a.kind, Kind::interrupt);
  a = m.on_written(t0);
  ASSERT_EQ(a.kind, Kind::read);
  EXPECT_TRUE(a.arm);
  EXPECT_EQ(a.until, t0 + 1s);
  EXPECT_EQ(m.on_timer(t0 + 1s), std::nullopt);
  ASSERT_EQ(m.on_expired().kind, Kind::kill_job);  // the job ignored Ctrl-C
  a = m.on_written(t0 + 1s);
  ASSERT_EQ(a.kind, Kind::read);
  EXPECT_EQ(a.until, t0 + 2s);  // each attempt has its own time
  ASSERT_EQ(m.on_bytes("Killed\r\nREXPS1f:9:137:0;", t0 + 1500ms).kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::prompt);
  EXPECT_EQ(m.outcome().match.status, 137);
}

TEST_F(CommandMachineTest, InterruptGivesUpAfterItsAttempts) {
  ASSERT_EQ(m.begin_interrupt(kNone, 0, 2, 1s).kind, Kind::interrupt);
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  EXPECT_EQ(m.on_timer(t0 + 1s), std::nullopt);
  ASSERT_EQ(m.on_expired().kind, Kind::kill_job);
  ASSERT_EQ(m.on_written(t0 + 1s).kind, Kind::read);
  EXPECT_EQ(m.on_timer(t0 + 2s), std::nullopt);
  ASSERT_EQ(m.on_expired().kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::timeout);
}

TEST_F(CommandMachineTest, InterruptAfterUsedAttemptsStillTriesOnceAndCanMatchExpect) {
  const std::vector<std::string> expect{">>> "};
  // The attempts were used up waiting for a running command: one more, and it is a kill.
  ASSERT_EQ(m.begin_interrupt(expect, 3, 3, 1s).kind, Kind::kill_job);
  ASSERT_EQ(m.on_written(t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("KeyboardInterrupt\r\n>>> ", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::expect);
  EXPECT_EQ(CommandMachine::escalation(0), Kind::interrupt);
  EXPECT_EQ(CommandMachine::escalation(1), Kind::kill_job);
}

TEST_F(CommandMachineTest, EndOfTerminalIsDeathUnlessThePromptCameLast) {
  deliver("exit\n", true, 1);
  ASSERT_EQ(m.on_bytes("exit\r\n", t0).kind, Kind::read);
  ASSERT_EQ(m.on_eof().kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::died);

  m.reset();
  deliver("true\n", true, 1);
  m.append("REXPS1f:2:0:0;");  // read in bulk after the terminal closed
  ASSERT_EQ(m.on_eof().kind, Kind::finished);
  EXPECT_EQ(m.outcome().kind, Stop::prompt);
}

TEST_F(CommandMachineTest, WaitForTheFirstPrompt) {
  auto a = m.begin_wait(kNone, t0 + 10s, t0);
  ASSERT_EQ(a.kind, Kind::read);
  EXPECT_TRUE(a.arm);
  ASSERT_EQ(m.on_bytes("rc output\r\nREXPS1f:1:0:0;", t0).kind, Kind::finished);
  EXPECT_EQ(m.outcome().match.command_number, 1u);
}

TEST_F(CommandMachineTest, CappedOutputKeepsHeadAndTailAndStillFindsThePrompt) {
  m.set_cap(1000);
  deliver("yes | head -c 200000\n", true, 1);
  const std::string block(1000, 'y');
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(m.on_bytes(block, t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("\r\nREXPS1f:2:0:0;", t0).kind, Kind::finished);
  EXPECT_EQ(m.head(), std::string(500, 'y'));
  EXPECT_GT(m.dropped(), 0u);
  std::size_t end = m.outcome().match.begin;
  std::size_t consumed = m.outcome().match.end;
  m.trim_tail(end, consumed);
  EXPECT_EQ(end, 500u);
  EXPECT_EQ(m.raw().substr(end, consumed - end), "REXPS1f:2:0:0;");
  EXPECT_EQ(m.dropped() + 500 + end, 200002u);
}

TEST_F(CommandMachineTest, StreamsWholeCleanedLines) {
  std::vector<std::string> lines;
  m.set_line_sink([&](std::string_view piece) { lines.emplace_back(piece); });
  deliver("make\n", true, 1);
  ASSERT_EQ(m.on_bytes("one\r\ntw", t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("o\r\n\x1b[1mthree\x1b[0m", t0).kind, Kind::read);
  ASSERT_EQ(m.on_bytes("\r\nREXPS1f:2:0:0;", t0).kind, Kind::finished);
  EXPECT_EQ(lines, (std::vector<std::string>{"one\n", "two\n", "three\n"}));
}

TEST_F(CommandMachineTest, LastPromptOfACommandLeftRunning) {
  m.append("late output\r\nREXPS1f:4:0:0;more\r\nREXPS1f:5;REXPS1f:5:1:1;tail");
  const auto last = m.last_prompt();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->command_number, 5u);
  EXPECT_EQ(last->status, 1);
  m.reset();
  EXPECT_FALSE(m.last_prompt().has_value());
}

}  // namespace
}  // namespace rex
