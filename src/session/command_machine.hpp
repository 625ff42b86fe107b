// CommandMachine: the decisions of one bash session's commands, apart from all I/O.
//
// It owns the session's output buffer (raw bytes, or a frozen head and a sliding tail when the
// output is capped) and turns events (bytes read from the terminal, a write done, a timer that
// fired, the end of the terminal, a syntax check passed) into the next action: read (and arm the
// timer until a time), write these bytes, interrupt or kill the foreground job, check the
// command's syntax, or finish with an outcome. It never reads the clock (time comes with the
// events), never touches a descriptor and never starts a process, so transcripts drive it in
// tests exactly as bash drives it in BashSession.
//
// What it decides (see ShellFraming for the prompt): where a command ends (a prompt, one of the
// expect strings, a deadline, an idle limit, the end of the terminal), that a directly written
// line turned out incomplete (Ctrl-C, a syntax check, then eval delivery), that a prompt whose
// command number did not grow must be confirmed with an empty line, and the interrupt's
// escalation (Ctrl-C first, then SIGKILL for the foreground job, each attempt with its own time).
//
// Threading: none of its own; BashSession calls it from the session's executor only.
#pragma once

#include <rex/session/shell_framing.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

class CommandMachine {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  /// Why waiting for the end of a command stopped.
  struct Stop {
    enum Kind { prompt, expect, timeout, idle, died } kind = timeout;
    PromptMatch match{};
    std::size_t expect_index = 0;
    std::size_t expect_pos = 0;  // offset of the expect string in the buffer
  };

  /// What the caller does next, then reports with the matching event.
  struct Action {
    enum class Kind {
      read,          // read from the terminal: on_bytes, on_expired or on_eof
      write,         // write `bytes` (all of them), then on_written
      interrupt,     // Ctrl-C (and SIGKILL for a foreground job that ignores it), then on_written
      kill_job,      // SIGKILL the foreground job (never bash), then on_written
      check_syntax,  // note `prompt` (the line was dropped), run `bash -n`, then on_syntax_ok
      finished,      // outcome() says how the operation ended
    };
    Kind kind = Kind::finished;
    std::string_view bytes{};  // write
    // read: a new wait begins; (re)arm the timer for `until` (max: no timer).
    bool arm = false;
    TimePoint until = TimePoint::max();
    PromptMatch prompt{};  // check_syntax
  };

  /// Receives whole lines of output as they arrive (streaming); called from append.
  using LineSink = std::function<void(std::string_view)>;

  explicit CommandMachine(const ShellFraming& framing) : framing_(framing) {}

  // ---- operations ------------------------------------------------------------------------------

  /// A framed command: `line` goes out (direct delivery if `direct`), then the machine waits for
  /// the prompt or one of `expect`. `command_number` is bash's count before the command. `line`
  /// and `expect` must outlive the operation.
  Action begin_command(std::string_view line, bool direct, const std::vector<std::string>& expect,
                       std::uint64_t command_number, TimePoint deadline,
                       std::optional<Clock::duration> idle);
  /// Input for an interactive program: `input` goes out, then the prompt or one of `expect`.
  Action begin_input(std::string_view input, const std::vector<std::string>& expect,
                     TimePoint deadline, std::optional<Clock::duration> idle);
  /// Only a wait (the caller wrote already): the prompt or one of `expect` until `deadline`.
  Action begin_wait(const std::vector<std::string>& expect, TimePoint deadline, TimePoint now);
  /// Interrupt attempts `first` to `last - 1` (0: Ctrl-C; later ones: SIGKILL for the foreground
  /// job), each waiting `attempt_time` for the prompt or one of `expect`.
  Action begin_interrupt(const std::vector<std::string>& expect, int first, int last,
                         Clock::duration attempt_time);

  /// The step of interrupt attempt `attempt` (also while another operation holds the session).
  static Action::Kind escalation(int attempt) {
    return attempt == 0 ? Action::Kind::interrupt : Action::Kind::kill_job;
  }

  // ---- events ----------------------------------------------------------------------------------

  /// Bytes read from the terminal. `now` matters only while needs_clock() is true.
  Action on_bytes(std::string_view bytes, TimePoint now);
  /// The bytes of a write (or the signal of an interrupt or kill) went out.
  Action on_written(TimePoint now);
  /// The syntax check passed: `eval_line` (eval delivery) goes out next.
  Action on_syntax_ok(std::string_view eval_line);
  /// The timer fired. Returns the time to re-arm it for, or nothing when a limit has passed
  /// (then the pending read must be cancelled and on_expired reported).
  std::optional<TimePoint> on_timer(TimePoint now);
  /// A limit of the current wait passed (after on_timer said so).
  Action on_expired();
  /// Every holder of the terminal is gone; the bytes read last were appended already.
  Action on_eof();

  bool expired() const noexcept { return expiry_ != Expiry::none; }
  /// The current wait has an idle limit: on_bytes needs the current time.
  bool needs_clock() const noexcept { return idle_.has_value(); }

  /// How the operation ended (after Action::Kind::finished).
  const Stop& outcome() const noexcept { return stop_; }
  /// The command went out directly, and was not rewritten for eval delivery.
  bool direct() const noexcept { return direct_; }

  // ---- output ----------------------------------------------------------------------------------

  /// Appends bytes without a decision (a read of what bash already wrote).
  void append(std::string_view bytes);
  void set_cap(std::optional<std::size_t> cap) { cap_ = cap; }
  std::optional<std::size_t> cap() const noexcept { return cap_; }
  void set_line_sink(LineSink sink) { sink_ = std::move(sink); }

  const std::string& raw() const noexcept { return raw_; }
  /// The frozen head of capped output (empty when nothing was dropped).
  const std::string& head() const noexcept { return head_; }
  std::uint64_t dropped() const noexcept { return dropped_; }
  /// Prepares taking the output up to `end` (offset in raw()) and consumed through `consumed`:
  /// when capped, drops all but the last half of the cap before `end`; adjusts both offsets.
  void trim_tail(std::size_t& end, std::size_t& consumed);
  /// Removes raw()[0, consumed) and the head: the output was taken.
  void forget(std::size_t consumed);
  /// Drops all output (stale output, or what the startup files printed).
  void reset();

  /// The last primary prompt in the output (a command left running may have finished since).
  std::optional<PromptMatch> last_prompt() const;

 private:
  enum class Phase { idle, deliver, discard_line, eval, confirm, input, wait, interrupt };
  enum class Expiry { none, deadline, idle };

  Action start_wait(const std::vector<std::string>& expect, TimePoint deadline,
                    std::optional<Clock::duration> idle, TimePoint now,
                    bool stop_at_continuation = false);
  Action scan();
  Action on_stop(Stop stop);
  Action finish(Stop stop);
  std::optional<PromptMatch> next_prompt();
  void erase_prompt(const PromptMatch& m);
  void drop_front(std::size_t n, bool count);
  void stream_lines();

  const ShellFraming& framing_;
  static const std::vector<std::string> no_expect_;

  // The operation.
  Phase phase_ = Phase::idle;
  std::string_view line_{};
  bool direct_ = false;
  std::uint64_t command_number_ = 0;
  bool rejected_ = false;  // the prompt a confirmation replaced said bash rejected the text
  const std::vector<std::string>* op_expect_ = &no_expect_;
  TimePoint op_deadline_{};
  std::optional<Clock::duration> op_idle_{};
  int attempt_ = 0;
  int last_attempt_ = 0;
  Clock::duration attempt_time_{};
  Stop stop_{};

  // The current wait.
  const std::vector<std::string>* expect_ = &no_expect_;
  std::size_t longest_ = 0;
  bool stop_at_continuation_ = false;
  TimePoint deadline_{};
  std::optional<Clock::duration> idle_{};
  TimePoint last_output_{};
  Expiry expiry_ = Expiry::none;
  bool arm_ = false;

  // The output.
  std::string raw_;
  std::string head_;
  std::uint64_t dropped_ = 0;
  std::optional<std::size_t> cap_;
  std::size_t prompt_scan_ = 0;
  std::size_t expect_scan_ = 0;
  std::size_t streamed_ = 0;  // bytes at the front of raw_ already given to the sink
  LineSink sink_;
};

}  // namespace rex
