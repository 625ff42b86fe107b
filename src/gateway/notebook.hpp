// Notebook: `execute` as a notebook runs cells, over any sandbox's Runtime. Python cells run in
// one long-lived interpreter per session (notebook_kernel.py, started in the sandbox at the first
// Python cell), so imports and variables carry over and the value of a cell's last expression
// comes back in `results`; bash cells run in the session's own persistent shell ("notebook").
// Cells of one session run one after another.
//
// The answer: {"stdout", "stderr", "results": [{"type": "text", "text"}], "artifacts": [],
// "exit_code", "error": null | {"name", "value", "traceback"}}.
//
// Threading: the runtime's executor.
#pragma once

#include <rex/core/async_mutex.hpp>
#include <rex/gateway/provider.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <optional>
#include <string>

namespace rex::gateway {

/// Starts the notebook's shell (kNotebookShell, provider.hpp) in the sandbox of `runtime`, in
/// `working_dir`. False when it was there already.
asio::awaitable<bool> start_notebook_shell(Runtime& runtime, std::string working_dir);

class Notebook {
 public:
  /// `scratch_dir`: a directory in the sandbox for the kernel's files (made when missing).
  /// `shell_started`: the shell runs already (the provider started it), and is not asked for.
  Notebook(asio::any_io_executor executor, Runtime& runtime, std::string scratch_dir,
           std::string working_dir, bool shell_started = false);

  /// Runs one cell. `language`: python (also py, python3) or bash (also sh, shell); anything
  /// else is an ApiError (422 execute.unknown_language). A cell that raises is an answer with
  /// `error` set, not an exception; a sandbox without python3 answers an ApiError (422
  /// execute.no_python).
  asio::awaitable<boost::json::object> execute(std::string code, std::string language,
                                               std::optional<double> timeout);

 private:
  asio::awaitable<boost::json::object> run_python(const std::string& code,
                                                  std::optional<double> timeout);
  asio::awaitable<boost::json::object> run_bash(const std::string& code,
                                                std::optional<double> timeout);
  asio::awaitable<void> ensure_shell();
  asio::awaitable<void> start_kernel();

  Runtime& runtime_;
  std::string dir_;  // the kernel's folder in the sandbox
  std::string working_dir_;
  AsyncMutex turn_;
  bool shell_ready_ = false;
  bool kernel_written_ = false;
  std::uint64_t cells_ = 0;
};

}  // namespace rex::gateway
