#include "session/command_machine.hpp"

#include <rex/session/output.hpp>

#include <algorithm>
#include <utility>

namespace rex {

const std::vector<std::string> CommandMachine::no_expect_{};

namespace {

constexpr std::string_view kCtrlC = "\x03";
constexpr std::string_view kEmptyLine = "\n";

CommandMachine::Action write_action(std::string_view bytes) {
  CommandMachine::Action a;
  a.kind = CommandMachine::Action::Kind::write;
  a.bytes = bytes;
  return a;
}

}  // namespace

// ---- operations --------------------------------------------------------------------------------

CommandMachine::Action CommandMachine::begin_command(std::string_view line, bool direct,
                                                     const std::vector<std::string>& expect,
                                                     std::uint64_t command_number,
                                                     TimePoint deadline,
                                                     std::optional<Clock::duration> idle) {
  phase_ = Phase::deliver;
  line_ = line;
  direct_ = direct;
  command_number_ = command_number;
  rejected_ = false;
  op_expect_ = &expect;
  op_deadline_ = deadline;
  op_idle_ = idle;
  return write_action(line_);
}

CommandMachine::Action CommandMachine::begin_input(std::string_view input,
                                                   const std::vector<std::string>& expect,
                                                   TimePoint deadline,
                                                   std::optional<Clock::duration> idle) {
  phase_ = Phase::input;
  line_ = input;
  op_expect_ = &expect;
  op_deadline_ = deadline;
  op_idle_ = idle;
  return write_action(line_);
}

CommandMachine::Action CommandMachine::begin_wait(const std::vector<std::string>& expect,
                                                  TimePoint deadline, TimePoint now) {
  phase_ = Phase::wait;
  return start_wait(expect, deadline, std::nullopt, now);
}

CommandMachine::Action CommandMachine::begin_interrupt(const std::vector<std::string>& expect,
                                                       int first, int last,
                                                       Clock::duration attempt_time) {
  phase_ = Phase::interrupt;
  op_expect_ = &expect;
  attempt_ = first;
  last_attempt_ = std::max(last, first + 1);  // at least one attempt
  attempt_time_ = attempt_time;
  Action a;
  a.kind = escalation(attempt_);
  return a;
}

// ---- events ------------------------------------------------------------------------------------

CommandMachine::Action CommandMachine::on_written(TimePoint now) {
  switch (phase_) {
    case Phase::deliver:
      // A directly written line may turn out incomplete: its continuation prompt ends the wait.
      return start_wait(*op_expect_, op_deadline_, op_idle_, now, direct_);
    case Phase::eval:
    case Phase::input:
      return start_wait(*op_expect_, op_deadline_, op_idle_, now);
    case Phase::discard_line:
    case Phase::confirm:
      return start_wait(no_expect_, op_deadline_, std::nullopt, now);
    case Phase::interrupt:
      return start_wait(*op_expect_, now + attempt_time_, std::nullopt, now);
    case Phase::idle:
    case Phase::wait:
      break;
  }
  return finish(Stop{Stop::died});  // not reached: no write is pending in these phases
}

CommandMachine::Action CommandMachine::on_syntax_ok(std::string_view eval_line) {
  direct_ = false;
  line_ = eval_line;
  return write_action(line_);
}

CommandMachine::Action CommandMachine::on_bytes(std::string_view bytes, TimePoint now) {
  append(bytes);
  if (idle_)
    last_output_ = now;
  return scan();
}

std::optional<CommandMachine::TimePoint> CommandMachine::on_timer(TimePoint now) {
  if (now >= deadline_) {
    expiry_ = Expiry::deadline;
    return std::nullopt;
  }
  if (idle_ && now >= last_output_ + *idle_) {
    expiry_ = Expiry::idle;
    return std::nullopt;
  }
  // Output came since the timer was armed: the idle limit moved.
  return idle_ ? std::min(deadline_, last_output_ + *idle_) : deadline_;
}

CommandMachine::Action CommandMachine::on_expired() {
  return on_stop(Stop{expiry_ == Expiry::deadline ? Stop::timeout : Stop::idle});
}

CommandMachine::Action CommandMachine::on_eof() {
  // One last look: the prompt may have arrived with the final bytes.
  if (auto m = next_prompt())
    return on_stop(Stop{Stop::prompt, *m});
  return on_stop(Stop{Stop::died});
}

// ---- steps -------------------------------------------------------------------------------------

CommandMachine::Action CommandMachine::start_wait(const std::vector<std::string>& expect,
                                                  TimePoint deadline,
                                                  std::optional<Clock::duration> idle,
                                                  TimePoint now, bool stop_at_continuation) {
  expect_ = &expect;
  longest_ = 0;
  for (const auto& e : expect)
    longest_ = std::max(longest_, e.size());
  stop_at_continuation_ = stop_at_continuation;
  deadline_ = deadline;
  idle_ = idle;
  last_output_ = now;
  expiry_ = Expiry::none;
  arm_ = deadline != TimePoint::max() || idle;
  return scan();
}

// The earliest of the prompt and the expect strings ends the wait; otherwise read on.
CommandMachine::Action CommandMachine::scan() {
  Stop stop{Stop::timeout};
  std::size_t best = std::string::npos;
  if (auto m = next_prompt()) {
    best = m->begin;
    stop = Stop{Stop::prompt, *m};
  }
  const auto& expect = *expect_;
  for (std::size_t i = 0; i < expect.size(); ++i) {
    if (expect[i].empty())
      continue;
    const std::size_t pos = raw_.find(expect[i], expect_scan_);
    if (pos != std::string::npos && (best == std::string::npos || pos < best)) {
      best = pos;
      stop = Stop{Stop::expect, {}, i, pos};
    }
  }
  if (best != std::string::npos)
    return on_stop(stop);
  if (longest_ > 0)
    expect_scan_ = raw_.size() >= longest_ ? raw_.size() - longest_ + 1 : 0;
  Action a;
  a.kind = Action::Kind::read;
  a.arm = std::exchange(arm_, false);
  a.until = idle_ ? std::min(deadline_, last_output_ + *idle_) : deadline_;
  return a;
}

CommandMachine::Action CommandMachine::on_stop(Stop stop) {
  const bool at_prompt = stop.kind == Stop::prompt;
  switch (phase_) {
    case Phase::deliver:
      if (at_prompt && stop.match.continuation) {
        // Bash waits for the rest of an incomplete command; nothing has run. Ctrl-C drops the
        // line ($? becomes 130, as at a terminal). `bash -n` reports a syntax error without
        // touching the session (bash before 5.1 exits on `eval` of an unfinished `if`); text it
        // accepts (a heredoc that ends with the text) runs through eval.
        phase_ = Phase::discard_line;
        return write_action(kCtrlC);
      }
      [[fallthrough]];
    case Phase::eval:
      if (at_prompt && stop.match.command_number == command_number_) {
        // The command number did not grow: a direct line bash rejected, or a prompt bash
        // decoded before the line ran and printed after it (after an `eval` whose text ends
        // inside a quote). An empty line, which runs nothing and keeps $?, brings a current
        // prompt; the stale one leaves the output.
        rejected_ = stop.match.rejected;
        erase_prompt(stop.match);
        phase_ = Phase::confirm;
        return write_action(kEmptyLine);
      }
      return finish(stop);
    case Phase::discard_line: {
      if (!at_prompt)
        return finish(stop);
      command_number_ = stop.match.command_number;
      forget(stop.match.end);
      phase_ = Phase::eval;
      Action a;
      a.kind = Action::Kind::check_syntax;
      a.prompt = stop.match;
      return a;
    }
    case Phase::confirm:
      // It may also be output that reproduces the prompt (`${PS1@P}`) or the late answer to an
      // earlier empty line: as bash counts every eval line, for one the prompts that still did
      // not grow are removed until one that did.
      if (!direct_ && at_prompt && !stop.match.rejected &&
          stop.match.command_number == command_number_) {
        erase_prompt(stop.match);
        return start_wait(no_expect_, op_deadline_, std::nullopt, last_output_);
      }
      if (at_prompt)
        stop.match.rejected = stop.match.rejected || rejected_;
      return finish(stop);
    case Phase::interrupt:
      if ((stop.kind == Stop::timeout || stop.kind == Stop::idle) && ++attempt_ < last_attempt_) {
        Action a;
        a.kind = escalation(attempt_);
        return a;
      }
      return finish(stop);
    case Phase::idle:
    case Phase::input:
    case Phase::wait:
      break;
  }
  return finish(stop);
}

CommandMachine::Action CommandMachine::finish(Stop stop) {
  stop_ = stop;
  phase_ = Phase::idle;
  expect_ = &no_expect_;
  idle_.reset();
  return Action{};
}

// ---- output ------------------------------------------------------------------------------------

// The next prompt from prompt_scan_. Continuation prompts are bash reading the continuation
// lines of an eval line (or input meant for a program that has exited): they are removed from
// the output, unless the wait stops at them.
std::optional<PromptMatch> CommandMachine::next_prompt() {
  while (true) {
    std::size_t resume = 0;
    auto m = framing_.find_prompt(raw_, prompt_scan_, resume);
    if (!m) {
      prompt_scan_ = resume;
      return std::nullopt;
    }
    if (!m->continuation || stop_at_continuation_)
      return m;
    erase_prompt(*m);
  }
}

std::optional<PromptMatch> CommandMachine::last_prompt() const {
  std::optional<PromptMatch> last;
  for (std::size_t from = 0, resume = 0;;) {
    const auto m = framing_.find_prompt(raw_, from, resume);
    if (!m)
      break;
    if (!m->continuation)
      last = m;
    from = m->end;
  }
  return last;
}

void CommandMachine::append(std::string_view bytes) {
  raw_.append(bytes);
  if (sink_)
    stream_lines();
  // Capped: keep the first half of the cap and a sliding tail; compact in large steps.
  if (!cap_ || raw_.size() <= *cap_ + (64 << 10))
    return;
  const std::size_t half = std::max<std::size_t>(*cap_ / 2, 1);
  if (head_.empty()) {
    head_.assign(raw_, 0, half);
    drop_front(half, false);
  }
  const std::size_t keep = half + 4096;  // room for a prompt split across reads
  if (raw_.size() > keep)
    drop_front(raw_.size() - keep, true);
}

// Only whole lines go out, so a split escape sequence or the prompt (which ends no line) never
// does; the observation at the end remains the complete, authoritative output.
void CommandMachine::stream_lines() {
  const auto nl = raw_.rfind('\n');
  if (nl == std::string::npos || nl + 1 <= streamed_)
    return;
  const std::string piece =
      clean_terminal_output(std::string_view(raw_).substr(streamed_, nl + 1 - streamed_));
  streamed_ = nl + 1;
  if (!piece.empty())
    sink_(piece);
}

void CommandMachine::drop_front(std::size_t n, bool count) {
  raw_.erase(0, n);
  streamed_ = streamed_ > n ? streamed_ - n : 0;
  if (count)
    dropped_ += n;
  prompt_scan_ = prompt_scan_ > n ? prompt_scan_ - n : 0;
  expect_scan_ = expect_scan_ > n ? expect_scan_ - n : 0;
}

// Removes a prompt that does not end the command from the output; the scan goes on there.
void CommandMachine::erase_prompt(const PromptMatch& m) {
  const std::size_t len = m.end - m.begin;
  raw_.erase(m.begin, len);
  prompt_scan_ = m.begin;
  auto shift = [&](std::size_t& at) {
    if (at > m.begin)
      at = at >= m.end ? at - len : m.begin;
  };
  shift(expect_scan_);
  shift(streamed_);
}

void CommandMachine::trim_tail(std::size_t& end, std::size_t& consumed) {
  if (head_.empty() || !cap_)
    return;
  // Capped: keep only the last half of the cap from the tail as well.
  const std::size_t half = std::max<std::size_t>(*cap_ / 2, 1);
  if (end > half) {
    const std::size_t cut = end - half;
    drop_front(cut, true);
    end -= cut;
    consumed -= std::min(consumed, cut);
  }
}

void CommandMachine::forget(std::size_t consumed) {
  raw_.erase(0, std::min(consumed, raw_.size()));
  head_.clear();
  dropped_ = 0;
  prompt_scan_ = 0;
  expect_scan_ = 0;
}

void CommandMachine::reset() {
  raw_.clear();
  streamed_ = 0;
  head_.clear();
  dropped_ = 0;
  prompt_scan_ = 0;
  expect_scan_ = 0;
}

}  // namespace rex
