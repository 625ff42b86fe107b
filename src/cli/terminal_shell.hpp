// TerminalShell: `rex shell` when stdin and stdout are a terminal. This terminal is put into raw
// mode and attached to a shell on a pty in the sandbox (a background process with a pty,
// rex/protocol/processes.hpp): every key goes to the sandbox as typed, so its line editing,
// prompts, colours, full-screen programs and Ctrl-C (a byte for its terminal) work as in
// `docker exec -it`. The window's size follows this terminal's. This terminal's modes are
// restored on every way out (the shell's exit, a signal, a lost connection).
//
// Threading: the io_context's thread.
#pragma once

#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <map>
#include <memory>
#include <string>

namespace rex::cli {

namespace asio = boost::asio;

/// What the sandbox's shell starts with, beyond the sandbox's own defaults (a local
/// deployment's `env` and `working_dir`, which a container or a server has by itself).
struct TerminalShellOptions {
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: where the sandbox's server runs
  // Not empty: this terminal is lent to the sandbox's bash session of that name instead
  // (Runtime::attach_session) until Ctrl-P Ctrl-Q, which detaches and leaves it to its commands.
  std::string attach_session;
};

class TerminalShell {
 public:
  TerminalShell(asio::any_io_executor executor, TerminalShellOptions options);
  ~TerminalShell();
  TerminalShell(const TerminalShell&) = delete;
  TerminalShell& operator=(const TerminalShell&) = delete;

  /// Attaches until the sandbox's shell ends; its exit status (128 + N after signal N), or 0
  /// for a session detached from.
  asio::awaitable<int> run(Deployment& deployment);
  /// Before the deployment stops: this terminal back as it was, and the sandbox's shell ended.
  asio::awaitable<void> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::cli
