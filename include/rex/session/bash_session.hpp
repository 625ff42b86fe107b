// BashSession: one interactive bash in a pseudo-terminal, driven by coroutines.
//
// State (working directory, variables, functions, aliases, options) persists across commands.
// Each command costs one round trip: the prompt carries a per-session random marker and the
// exit status (ShellFraming). Interactive programs (python3, gdb, pdb) are driven with
// is_interactive_command / expect and left with is_interactive_quit. An interrupt sends Ctrl-C
// and, if the foreground job ignores it, kills that job.
//
// Threading: every member function must be called from the executor the session was created
// with (one strand). Operations on one session run one after another, except `interrupt`,
// which also reaches a command that is still running, and `close`, which ends everything.
// Different sessions never wait on each other.
#pragma once

#include <rex/protocol/actions.hpp>
#include <rex/protocol/session.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace rex {

namespace asio = boost::asio;

struct BashSessionConfig {
  std::string bash_path = "/bin/bash";
  // Source /etc/bash.bashrc and ~/.bashrc as a login terminal would. Off by default: sessions
  // start in milliseconds and behave the same on every machine; pass the files you need as
  // startup_source instead.
  bool load_rc_files = false;
  std::string term = "xterm";
  unsigned short columns = 250;
  unsigned short rows = 50;
  /// Environment set before bash and its startup files run, so those files can override them.
  /// The defaults keep pagers from waiting for a key press.
  std::map<std::string, std::string> environment = {
      {"PAGER", "cat"},         {"GIT_PAGER", "cat"}, {"MANPAGER", "cat"},
      {"SYSTEMD_PAGER", "cat"}, {"LESS", "-FRX"},     {"PIP_NO_INPUT", "1"},
  };
  /// Default cap on one observation's output (head and tail are kept); none = unlimited.
  /// A BashAction's max_output_bytes takes precedence.
  std::optional<std::int64_t> max_output_bytes{};
  /// Directory bash starts in; empty = this process's current directory. Must exist.
  std::string working_dir{};
};

class BashSession {
 public:
  /// Receives a running command's output as it arrives: whole lines, cleaned like the
  /// observation's output. Called on the session's executor; must not block.
  using OutputListener = std::function<void(std::string_view)>;
  /// Receives an attached terminal's events (attach); returns false to detach.
  using EventListener = std::function<bool(const ProcessEvent&)>;

  BashSession(asio::any_io_executor executor, BashSessionConfig config = {});
  ~BashSession();
  BashSession(const BashSession&) = delete;
  BashSession& operator=(const BashSession&) = delete;

  /// Starts bash, sources the startup files, returns what they printed. Throws PexpectTimeout
  /// when the prompt does not appear within startup_timeout (the shell is then ended).
  asio::awaitable<CreateBashSessionResponse> start(CreateBashSessionRequest request);

  /// Runs a command (or interactive input). Throws CommandTimeoutError (the command keeps
  /// running; interrupt it to reuse the session), NonZeroExitCodeError (check = "raise"),
  /// BashIncorrectSyntaxError (nothing ran), SessionDiedError, SessionBusyError.
  asio::awaitable<BashObservation> run(BashAction action, OutputListener on_output = {});

  /// Stops the running command: Ctrl-C, then SIGKILL for a foreground job that ignores it.
  /// Throws PexpectTimeout if the prompt (or an expect string) still does not come back.
  asio::awaitable<BashObservation> interrupt(BashInterruptAction action);

  /// Writes `input` to the terminal of the command running now (a `read`, a REPL, a prompt), as
  /// typed; like interrupt, it reaches a command whose run is still waiting. Throws
  /// NoCommandRunningError when none runs (bash would take the input as a command),
  /// SessionDiedError.
  asio::awaitable<void> send_input(std::string input);

  /// Lends the session's own terminal to a person between its commands (SessionAttach): bash
  /// gets a prompt for people, echo and the given size, and its output goes to `on_event` as it
  /// comes ("started" first, with bash's pid; "keepalive" while quiet); keys go through
  /// send_input. Commands and interrupts are refused (SessionBusyError) meanwhile. When the
  /// listener returns false (or the wait is cancelled) the session is handed back: what the
  /// person left in the foreground is interrupted, then killed, a half-typed line is dropped,
  /// and rex's prompt is installed again; then nothing is returned. When bash ends (`exit`),
  /// how it ended. Throws SessionBusyError while a command runs or another terminal is
  /// attached, ValueError for a size no terminal has.
  asio::awaitable<std::optional<ProcessEnd>> attach(SessionAttach request, EventListener on_event);
  /// The attached terminal's new size; ValueError when none is attached.
  asio::awaitable<void> resize(SessionResize request);

  /// Ends bash and every process of its session (SIGKILL), reaps it, closes its descriptors.
  /// Safe to call more than once and while a command runs.
  asio::awaitable<void> close();

  /// The shell's process id (its session and process group id too); -1 before start.
  pid_t pid() const noexcept;
  /// False once bash has exited or was killed.
  bool alive() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace rex
