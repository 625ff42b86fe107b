#include <rex/core/outcome.hpp>
#include <rex/core/text.hpp>
#include <rex/eval/instance_runner.hpp>
#include <rex/protocol/exceptions.hpp>

#include <fmt/format.h>
#include <boost/asio/this_coro.hpp>
#include <boost/core/demangle.hpp>

#include <chrono>
#include <typeinfo>

#include "core/clock.hpp"

namespace rex {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view session_name = "rex-eval";
constexpr std::size_t max_error_message = 4096;

using rex::detail::seconds_since;

// A sandbox path: absolute as given, relative to the session's working directory otherwise.
std::string in_sandbox(const std::string& cwd, const std::string& path) {
  if (path.starts_with('/') || cwd.empty())
    return path;
  return cwd == "/" ? "/" + path : cwd + "/" + path;
}

BashAction command_action(std::string command, double timeout, std::int64_t log_limit) {
  BashAction action;
  action.command = std::move(command);
  action.session = std::string(session_name);
  action.timeout = timeout;
  action.check = "silent";
  action.max_output_bytes = log_limit;
  return action;
}

std::string first_line(std::string_view command) {
  const auto end = command.find('\n');
  if (end == std::string_view::npos)
    return std::string(command);
  return std::string(command.substr(0, end)) + " ...";
}

std::string what_of(const std::exception_ptr& error) {
  std::string text;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
    text = "unknown error";
  }
  if (text.size() > max_error_message)
    text = text.substr(0, max_error_message) + " ...";
  return text;
}

void set_error(EvalResult& result, std::string phase, const std::exception_ptr& error) {
  result.status = EvalStatus::error;
  result.error = EvalError{std::move(phase), exception_type_name(error), what_of(error)};
}

// What a timed-out command had printed (the exception carries it).
std::string output_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const SwerexException& e) {
    const auto it = e.extra_info().find("output");
    if (it != e.extra_info().end() && it->value().is_string())
      return std::string(it->value().as_string());
  } catch (...) {
  }
  return {};
}

bool is_timeout(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const CommandTimeoutError&) {
    return true;
  } catch (...) {
  }
  return false;
}

// The caller's cancellation is not the instance's failure: it ends the runner instead.
asio::awaitable<void> rethrow_if_cancelled(const std::exception_ptr& error) {
  const auto state = co_await asio::this_coro::cancellation_state;
  if (error && state.cancelled() != asio::cancellation_type::none)
    std::rethrow_exception(error);
}

void append_log(std::string& log, const std::string& command, const std::string& output,
                const std::string& ending) {
  log += "$ " + command + "\n" + output;
  if (!output.empty() && output.back() != '\n')
    log += '\n';
  log += ending + "\n";
}

}  // namespace

std::string exception_type_name(const std::exception_ptr& error) {
  if (!error)
    return {};
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    const std::string name = boost::core::demangle(typeid(e).name());
    const auto colon = name.rfind("::");
    return colon == std::string::npos ? name : name.substr(colon + 2);
  } catch (...) {
  }
  return "unknown";
}

asio::awaitable<EvalRun> run_eval_instance(Runtime& runtime, const EvalInstance& instance,
                                           EvalRunnerSettings settings) {
  EvalRun out;
  EvalResult& r = out.result;
  r.id = instance.id;
  r.status = EvalStatus::error;
  std::exception_ptr failure;

  // 1. The session, and where it stands.
  auto t0 = Clock::now();
  bool session_open = false;
  std::string cwd;
  try {
    CreateBashSessionRequest create;
    create.session = std::string(session_name);
    create.startup_timeout = settings.session_timeout;
    co_await runtime.create_session(create);
    session_open = true;
    const std::string where = settings.working_dir.empty()
                                  ? std::string("pwd")
                                  : "cd " + shell_quote(settings.working_dir) + " && pwd";
    BashAction locate = command_action(where, settings.session_timeout, 64 * 1024);
    const BashObservation seen = co_await runtime.run_in_session(locate);
    if (seen.exit_code != 0)
      throw std::runtime_error("cannot enter the working directory: " + seen.output);
    cwd = seen.output;
    while (!cwd.empty() && (cwd.back() == '\n' || cwd.back() == '\r'))
      cwd.pop_back();
  } catch (...) {
    failure = std::current_exception();
  }
  co_await rethrow_if_cancelled(failure);
  r.times.start = seconds_since(t0);
  if (failure)
    set_error(r, "start", failure);

  // 2. Uploads, 3. setup commands.
  if (!failure) {
    t0 = Clock::now();
    for (const auto& upload : instance.upload) {
      UploadRequest request;
      request.source_path = upload.source;
      request.target_path = in_sandbox(cwd, upload.target);
      auto uploading = runtime.upload(std::move(request));
      const auto uploaded = co_await capture(std::move(uploading));
      failure = uploaded.error();
      co_await rethrow_if_cancelled(failure);
      if (failure) {
        set_error(r, "upload", failure);
        break;
      }
    }
    for (std::size_t i = 0; i < instance.setup.size() && !failure; ++i) {
      const std::string& command = instance.setup[i];
      BashAction action = command_action(command, settings.setup_timeout, settings.log_limit);
      auto running = runtime.run_in_session(std::move(action));
      auto ran = co_await capture(std::move(running));
      failure = ran.error();
      co_await rethrow_if_cancelled(failure);
      if (failure) {
        append_log(out.setup_log, command, output_of(failure),
                   is_timeout(failure) ? fmt::format("[timeout after {} s]", settings.setup_timeout)
                                       : "[error]");
        set_error(r, "setup", failure);
        r.error->message =
            fmt::format("setup command {} of {} ({}): {}", i + 1, instance.setup.size(),
                        first_line(command), r.error->message);
        break;
      }
      const BashObservation& obs = *ran;
      const int code = obs.exit_code.value_or(-1);
      append_log(out.setup_log, command, obs.output, fmt::format("[exit {}]", code));
      r.setup_exit_codes.push_back(code);
      if (code != 0) {
        r.status = EvalStatus::error;
        r.error = EvalError{"setup", "SetupCommandFailed",
                            fmt::format("setup command {} of {} exited with {}: {}", i + 1,
                                        instance.setup.size(), code, first_line(command))};
        failure = std::make_exception_ptr(std::runtime_error(r.error->message));
      }
    }
    r.times.setup = seconds_since(t0);
  }

  // 4. The run command, in a subshell of the session: it sees what setup changed, and its own
  // `exit N` or `set -e` ends the subshell with that status instead of ending the session.
  if (!failure) {
    t0 = Clock::now();
    const double timeout = instance.timeout.value_or(settings.default_timeout);
    BashAction action = command_action("(\n" + instance.run + "\n)", timeout, settings.log_limit);
    auto running = runtime.run_in_session(std::move(action));
    auto ran = co_await capture(std::move(running));
    failure = ran.error();
    co_await rethrow_if_cancelled(failure);
    if (failure && is_timeout(failure)) {
      r.status = EvalStatus::timeout;
      out.run_log = output_of(failure);
      try {
        BashInterruptAction stop;
        stop.session = std::string(session_name);
        stop.timeout = 1.0;
        co_await runtime.run_in_session(stop);
      } catch (...) {
        // Closing the session below ends the command in any case.
      }
    } else if (failure) {
      set_error(r, "run", failure);
      out.run_log = output_of(failure);
    } else if (BashObservation& obs = *ran; !obs.exit_code) {
      r.status = EvalStatus::error;
      r.error = EvalError{"run", "NoExitCodeError", "the run command's exit status is unknown"};
      out.run_log = obs.output;
    } else {
      r.exit_code = obs.exit_code;
      r.status = *obs.exit_code == 0 ? EvalStatus::passed : EvalStatus::failed;
      out.run_log = std::move(obs.output);
    }
    r.output = tail_of_output(out.run_log, settings.output_limit, r.output_truncated);
    r.times.run = seconds_since(t0);
  }

  // 5. Artifacts (whatever the outcome, as long as the sandbox started), 6. the session.
  t0 = Clock::now();
  if (session_open) {
    for (const auto& path : instance.artifacts) {
      const std::string name = eval_artifact_name(path);
      EvalArtifact artifact;
      artifact.path = path;
      DownloadRequest request;
      request.path = in_sandbox(cwd, path);
      request.target_path = settings.artifacts_dir + "/" + name;
      auto downloading = runtime.download(std::move(request));
      const auto downloaded = co_await capture(std::move(downloading));
      const std::exception_ptr error = downloaded.error();
      co_await rethrow_if_cancelled(error);
      if (error)
        artifact.error = what_of(error);
      else
        artifact.saved = settings.artifacts_prefix + "/" + name;
      r.artifacts.push_back(std::move(artifact));
    }
    try {
      CloseBashSessionRequest close;
      close.session = std::string(session_name);
      co_await runtime.close_session(close);
    } catch (...) {
      // Stopping the sandbox ends the session too.
    }
  }
  r.times.teardown = seconds_since(t0);
  co_return out;
}

}  // namespace rex
