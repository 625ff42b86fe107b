#include "gateway/notebook.hpp"

#include <rex/core/text.hpp>
#include <rex/protocol/exceptions.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "gateway/api_error.hpp"
#include "gateway/notebook_kernel_py.hpp"

namespace rex::gateway {

namespace json = boost::json;

namespace {

constexpr double kDefaultCellTimeout = 3600;

// The kernel's client's exit codes when it could not run the cell.
constexpr int kKernelUnreachable = 3;
constexpr int kKernelDied = 5;

// The last non-empty line of a command's output.
std::string_view last_line(std::string_view out) {
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.remove_suffix(1);
  const auto nl = out.rfind('\n');
  return nl == std::string_view::npos ? out : out.substr(nl + 1);
}

json::object cell_answer(std::string out, std::string err, json::array results, json::value error,
                         int exit_code) {
  return json::object{{"stdout", std::move(out)},      {"stderr", std::move(err)},
                      {"results", std::move(results)}, {"artifacts", json::array{}},
                      {"exit_code", exit_code},        {"error", std::move(error)}};
}

}  // namespace

Notebook::Notebook(asio::any_io_executor executor, Runtime& runtime, std::string scratch_dir,
                   std::string working_dir, bool shell_started)
    : runtime_(runtime),
      dir_(std::move(scratch_dir)),
      working_dir_(std::move(working_dir)),
      turn_(std::move(executor)),
      shell_ready_(shell_started) {}

asio::awaitable<json::object> Notebook::execute(std::string code, std::string language,
                                                std::optional<double> timeout) {
  language = ascii_lower(language);
  const bool python =
      language.empty() || language == "python" || language == "python3" || language == "py";
  const bool bash = language == "bash" || language == "sh" || language == "shell";
  if (!python && !bash)
    throw ApiError(422, "execute.unknown_language",
                   fmt::format("unknown language {:?}: expected python or bash", language));
  auto turn = co_await turn_.lock();
  if (python)
    co_return co_await run_python(code, timeout);
  co_return co_await run_bash(code, timeout);
}

asio::awaitable<bool> start_notebook_shell(Runtime& runtime, std::string working_dir) {
  CreateBashSessionRequest request;
  request.session = std::string(kNotebookShell);
  request.startup_timeout = 10;
  try {
    co_await runtime.create_session(std::move(request));
  } catch (const SessionExistsError&) {
    co_return false;
  }
  BashAction cd;
  cd.session = std::string(kNotebookShell);
  cd.command = "cd " + shell_quote(working_dir);
  cd.timeout = 30;
  cd.check = "silent";
  co_await runtime.run_in_session(std::move(cd));
  co_return true;
}

asio::awaitable<void> Notebook::ensure_shell() {
  if (shell_ready_)
    co_return;
  // Already there when it was made before a gateway restart (its state is kept) or the
  // sandbox was a spare.
  co_await start_notebook_shell(runtime_, working_dir_);
  shell_ready_ = true;
}

asio::awaitable<json::object> Notebook::run_bash(const std::string& code,
                                                 std::optional<double> timeout) {
  co_await ensure_shell();
  BashAction action;
  action.session = std::string(kNotebookShell);
  action.command = code;
  action.timeout = timeout.value_or(kDefaultCellTimeout);
  action.check = "silent";
  std::string died;
  try {
    const BashObservation seen = co_await runtime_.run_in_session(std::move(action));
    const int exit_code = seen.exit_code.value_or(-1);
    json::value error = nullptr;
    if (!seen.failure_reason.empty())
      error = json::object{
          {"name", "CommandFailed"}, {"value", seen.failure_reason}, {"traceback", ""}};
    co_return cell_answer(seen.output, "", json::array{}, std::move(error), exit_code);
  } catch (const CommandTimeoutError& e) {
    // The shell was interrupted and goes on; the cell's answer says so.
    co_return cell_answer(
        "", "", json::array{},
        json::object{{"name", "TimeoutError"}, {"value", e.what()}, {"traceback", ""}}, -1);
  } catch (const SessionDiedError& e) {
    died = e.what();
  }
  // The shell ended (the cell ran `exit`, or it was killed): this cell says so, and the next
  // one gets a new shell (its variables and directory are the new shell's).
  shell_ready_ = false;
  try {
    CloseBashSessionRequest close;
    close.session = std::string(kNotebookShell);
    co_await runtime_.close_session(std::move(close));
  } catch (const std::exception&) {
  }
  co_return cell_answer("", "", json::array{},
                        json::object{{"name", "ShellEnded"},
                                     {"value", died + "; the next bash cell starts a new shell"},
                                     {"traceback", ""}},
                        -1);
}

asio::awaitable<void> Notebook::start_kernel() {
  co_await ensure_shell();
  const std::string kernel = dir_ + "/kernel.py";
  const std::string socket = dir_ + "/kernel.sock";
  // Started from the session's shell, so the shell's end (the sandbox's) ends it too; waits
  // until the kernel listens.
  BashAction start;
  start.session = std::string(kNotebookShell);
  start.timeout = 60;
  start.check = "silent";
  start.command = fmt::format(
      "if ! command -v python3 >/dev/null 2>&1; then echo REX_NO_PYTHON; else "
      "(cd {wd} && setsid python3 {kernel} serve {socket} > {dir}/kernel.log 2>&1 &); "
      "i=0; while [ ! -S {socket} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
      "[ -S {socket} ] && echo REX_KERNEL_READY; fi",
      fmt::arg("wd", shell_quote(working_dir_)), fmt::arg("kernel", shell_quote(kernel)),
      fmt::arg("socket", shell_quote(socket)), fmt::arg("dir", shell_quote(dir_)));
  const BashObservation seen = co_await runtime_.run_in_session(std::move(start));
  if (seen.output.find("REX_NO_PYTHON") != std::string::npos)
    throw ApiError(422, "execute.no_python",
                   "this sandbox has no python3: run bash cells, or use an environment whose "
                   "image has python3");
  if (seen.output.find("REX_KERNEL_READY") == std::string::npos) {
    std::string log;
    try {
      ReadFileRequest read;
      read.path = dir_ + "/kernel.log";
      read.errors = "replace";
      log = (co_await runtime_.read_file(std::move(read))).content;
    } catch (const std::exception&) {
    }
    throw ApiError(
        502, "execute.kernel_failed",
        fmt::format("the Python kernel did not start: {}", log.empty() ? seen.output : log));
  }
}

asio::awaitable<json::object> Notebook::run_python(const std::string& code,
                                                   std::optional<double> timeout) {
  if (!kernel_written_) {
    WriteFileRequest script;
    script.path = dir_ + "/kernel.py";
    script.content = std::string(kNotebookKernel);
    co_await runtime_.write_file(std::move(script));
    kernel_written_ = true;
  }
  WriteFileRequest cell;
  cell.path = dir_ + "/cell.py";
  cell.content = code;
  co_await runtime_.write_file(std::move(cell));
  ++cells_;

  const double limit = timeout.value_or(kDefaultCellTimeout);
  Command run;
  run.command =
      fmt::format("python3 {} run {} --timeout {} < {}", shell_quote(dir_ + "/kernel.py"),
                  shell_quote(dir_ + "/kernel.sock"), limit, shell_quote(dir_ + "/cell.py"));
  run.shell = true;
  run.timeout = limit + 30;  // the client interrupts the cell at `limit` and still answers
  run.cwd = working_dir_;
  CommandResponse answer;
  for (int attempt = 0;; ++attempt) {
    answer = co_await runtime_.execute(run);
    if (answer.exit_code != kKernelUnreachable || attempt > 0)
      break;
    co_await start_kernel();
  }
  if (answer.exit_code == 127)
    throw ApiError(422, "execute.no_python", "this sandbox has no python3: " + answer.stderr_);
  if (answer.exit_code == kKernelDied)
    co_return cell_answer("", "", json::array{},
                          json::object{{"name", "KernelDied"},
                                       {"value",
                                        "the Python kernel ended while running the cell; "
                                        "the next cell starts a new one, without the "
                                        "state of earlier cells"},
                                       {"traceback", ""}},
                          1);
  boost::system::error_code ec;
  const std::string_view last = last_line(answer.stdout_);
  json::value reply = json::parse(last, ec);
  if (ec || !reply.is_object() || reply.get_object().contains("kernel"))
    throw ApiError(502, "execute.kernel_failed",
                   fmt::format("the Python kernel gave no answer (exit code {}): {}{}",
                               answer.exit_code.value_or(-1), answer.stdout_, answer.stderr_));
  auto& r = reply.get_object();
  auto text = [&](std::string_view key) {
    const auto* v = r.if_contains(key);
    return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  json::array results;
  if (const auto* v = r.if_contains("results"); v != nullptr && v->is_array())
    results = v->get_array();
  json::value error = nullptr;
  if (const auto* v = r.if_contains("error"); v != nullptr && v->is_object())
    error = *v;
  const int exit_code = error.is_null() ? 0 : 1;
  co_return cell_answer(text("stdout"), text("stderr"), std::move(results), std::move(error),
                        exit_code);
}

}  // namespace rex::gateway
