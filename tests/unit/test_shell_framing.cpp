// The shell framing of the session layer, pure logic with plain inputs: command lines, prompt
// detection, what a command text may do, syntax-error cleaning.
#include <rex/session/shell_framing.hpp>

#include <gtest/gtest.h>

namespace rex {
namespace {

TEST(ShellFraming, CommandLineIsOnePrintableLogicalLine) {
  ShellFraming f("0123abcd");
  const std::string line = f.command_line("echo 'x'\n\x03\x7f\xc3\xa9 \\");
  EXPECT_EQ(line.back(), '\n');
  for (std::size_t i = 0; i + 1 < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " at " << i;
  }
  EXPECT_NE(line.find("echo \\'x\\'\\x0a\\x03\\x7f\\xc3\\xa9 \\\\"), std::string::npos);
  EXPECT_THROW(f.command_line(std::string("a\0b", 3)), std::invalid_argument);
}

TEST(ShellFraming, LongCommandsAreSplitBelowTheTerminalLineLimit) {
  ShellFraming f("n");
  const std::string line = f.command_line(std::string(100000, 'x'));
  std::size_t start = 0;
  while (start < line.size()) {
    std::size_t end = line.find('\n', start);
    if (end == std::string::npos)
      end = line.size();
    EXPECT_LT(end - start, 4095u);
    start = end + 1;
  }
}

TEST(ShellFraming, EvalLineEndsWithTheHelperAndCanArmTheGuard) {
  ShellFraming f("n");
  EXPECT_EQ(f.command_line("true"), "__rex_ran=;eval $'__rex_ran=1;true';__rex_e\n");
  EXPECT_EQ(f.command_line("true", 3, true), "__rex_ran=;eval $'__rex_go 3;true';__rex_e 1\n");
  EXPECT_EQ(f.command_line("true", 0, false, true),
            "__rex_ran=;eval $'__rex_ran=1;true';__rex_e '' 1\n");
  EXPECT_EQ(f.command_line("true", 0, true, true),
            "__rex_ran=;eval $'__rex_ran=1;true';__rex_e 1 1\n");
}

TEST(ShellFraming, PromptVariablesHoldEscapesNotValues) {
  // Printing the variables (`set`, `echo "$PS1"`) must not look like a prompt.
  ShellFraming f("abc");
  std::size_t resume = 0;
  EXPECT_FALSE(f.find_prompt(f.prompt_text(), 0, resume));
  EXPECT_FALSE(f.find_prompt(f.continuation_prompt_text(), 0, resume));
  EXPECT_FALSE(f.find_prompt(f.setup_code(true), 0, resume));
}

TEST(ShellFraming, FindsCompletePromptsOnly) {
  ShellFraming f("abc");
  std::size_t resume = 0;
  auto m = f.find_prompt("out\nREXPS1abc:12:7:1;", 0, resume);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->begin, 4u);
  EXPECT_EQ(m->end, 21u);
  EXPECT_FALSE(m->continuation);
  EXPECT_FALSE(m->rejected);
  EXPECT_EQ(m->command_number, 12u);
  EXPECT_EQ(m->status, 7);
  EXPECT_EQ(m->jobs, 1);
  // The continuation prompt: bash waits for more of the command.
  m = f.find_prompt("REXPS1abc:5;", 0, resume);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->continuation);
  EXPECT_EQ(m->command_number, 5u);
  // Split across reads: resume at the partial marker.
  EXPECT_FALSE(f.find_prompt("data REXPS1abc:1:0", 0, resume));
  EXPECT_EQ(resume, 5u);
  EXPECT_TRUE(f.find_prompt("data REXPS1abc:1:0:0;", resume, resume));
  EXPECT_FALSE(f.find_prompt("data REXPS1a", 0, resume));
  EXPECT_LE(resume, 5u);
  EXPECT_TRUE(f.find_prompt("data REXPS1abc:1:0:0;", resume, resume));
  EXPECT_FALSE(f.find_prompt("data REXPS1abc:1", 0, resume));
  EXPECT_EQ(resume, 5u);
  // Lookalikes: another nonce, the raw PS1 text, malformed fields.
  EXPECT_FALSE(f.find_prompt("REXPS1abd:1:0:0;", 0, resume));
  EXPECT_FALSE(f.find_prompt("REXPS1abc:\\#:$?:\\j;", 0, resume));
  EXPECT_FALSE(f.find_prompt("REXPS1abc:1:0;", 0, resume));
  EXPECT_FALSE(f.find_prompt("REXPS1abc::0:0;", 0, resume));
  EXPECT_FALSE(f.find_prompt("REXPS1abc:1:1234:0;", 0, resume));
  EXPECT_FALSE(f.find_prompt("REXPS1abc:1:0:;", 0, resume));
  // A lookalike before the real prompt does not hide it.
  m = f.find_prompt("REXPS1abc:x REXPS1abc:3:0:0;", 0, resume);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->begin, 12u);
}

TEST(ShellFraming, RejectionFlagBelongsToThePrompt) {
  ShellFraming f("abc");
  std::size_t resume = 0;
  auto m = f.find_prompt("bash: syntax error\nREXPS1abc!REXPS1abc:4:2:0;", 0, resume);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->rejected);
  EXPECT_EQ(m->begin, 19u);  // the flag is not output
  EXPECT_EQ(m->status, 2);
  // Split right after the flag's marker.
  EXPECT_FALSE(f.find_prompt("x REXPS1abc", 0, resume));
  EXPECT_EQ(resume, 2u);
  m = f.find_prompt("x REXPS1abc!REXPS1abc:4:2:0;", resume, resume);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->rejected);
  EXPECT_EQ(m->begin, 2u);
  // Another session's flag does not count.
  m = f.find_prompt("REXPS1abd!REXPS1abc:4:0:0;", 0, resume);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->rejected);
}

TEST(ShellFraming, DirectDeliveryOnlyForPlainOneLineText) {
  for (std::string_view text :
       {"echo hi", "ls -la /tmp && cd /tmp || true", "grep -rn 'a.b' . | head -5 # comment",
        "find . -name '*.py' -exec wc -l {} +", "cmd >/dev/null 2>&1", "cmd &>/dev/null",
        "cmd |& tee log", "echo \"$((1+2))\" $'x'", "cat <<EOF", "echo 'unterminated",
        "python3 -c 'print(\"caf\xc3\xa9\")'", "echo a\tb", "cd resources; ./run.sh ..",
        "evaluate --sources x", "x=1; echo $x", "f() { echo hi; }"}) {
    EXPECT_TRUE(ShellFraming::inspect(text).direct) << text;
  }
  for (std::string_view text :
       {"", "echo a\necho b", "echo 'a\x03'", "echo \x7f", "echo a \\", "PS1='x> '",
        "export PROMPT_COMMAND=x", "echo $PS2", "source venv/bin/activate", ". venv/bin/activate",
        "cd x && . ./env.sh", "if true; then . x; fi", "eval \"$(direnv hook bash)\"",
        "builtin source f"}) {
    EXPECT_FALSE(ShellFraming::inspect(text).direct) << text;
  }
  EXPECT_TRUE(ShellFraming::inspect(std::string(1024, 'x')).direct);
  EXPECT_FALSE(ShellFraming::inspect(std::string(1025, 'x')).direct);
}

TEST(ShellFraming, TextThatMayStartJobs) {
  for (std::string_view text : {"sleep 10 &", "a & b", "(x &)", "coproc cat", "x&"}) {
    EXPECT_TRUE(ShellFraming::inspect(text).may_start_jobs) << text;
  }
  for (std::string_view text : {"a && b", "x 2>&1", "x &>f", "x >&2", "x |& y", "x <&3"}) {
    EXPECT_FALSE(ShellFraming::inspect(text).may_start_jobs) << text;
  }
}

TEST(ShellFraming, TextThatMayChangeThePromptLater) {
  for (std::string_view text :
       {"f() { echo hi; }", "function f { :; }", "g ( ) { :; }", "alias ll='ls -l'", "source x",
        ". x", "cd /repo\n. .venv/bin/activate", "eval x", "PS1=x", "unset PROMPT_COMMAND"}) {
    EXPECT_TRUE(ShellFraming::inspect(text).may_change_prompt_later) << text;
  }
  for (std::string_view text : {"echo hi", "ls (x)", "cd resources", "find . -name x",
                                "evaluate --sources x", "aliases; functions"}) {
    EXPECT_FALSE(ShellFraming::inspect(text).may_change_prompt_later) << text;
  }
}

TEST(ShellFraming, CleansSyntaxErrorsAndDetectsBlankText) {
  ShellFraming f("n");
  EXPECT_EQ(f.clean_syntax_error("bash: eval: line 1: `__rex_go 0;echo )'\n"),
            "bash: line 1: `echo )'\n");
  EXPECT_EQ(f.clean_syntax_error("bash: eval: line 1: `__rex_ran=1;echo )'\n"),
            "bash: line 1: `echo )'\n");
  EXPECT_TRUE(ShellFraming::is_blank(""));
  EXPECT_TRUE(ShellFraming::is_blank("  \n# c\n\t# d"));
  EXPECT_FALSE(ShellFraming::is_blank("# c\necho"));
  EXPECT_TRUE(ShellFraming::is_multiline("a\nb"));
  EXPECT_FALSE(ShellFraming::is_multiline("a; b"));
}

}  // namespace
}  // namespace rex
