// What the backends share in create(): a cloud sandbox's start (e2b, daytona, modal, fargate)
// handed over with where its sessions work, a request laid over a backend's settings, and
// errors named by the call that failed. Internal to the library.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/protocol/commands.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include "deployment/cloud_start.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace rex::detail {

/// `working_dir`, else where the sandbox of `runtime` starts processes (`pwd`; `fallback_dir`
/// when that fails).
inline asio::awaitable<std::string> working_dir_of(Runtime& runtime, std::string working_dir,
                                                   std::string fallback_dir) {
  if (!working_dir.empty())
    co_return working_dir;
  Command pwd;
  pwd.command = "pwd";
  pwd.shell = true;
  pwd.timeout = 30;
  auto asking = runtime.execute(std::move(pwd));
  const CommandResponse where = co_await std::move(asking);
  const std::string dir = where.stdout_.substr(0, where.stdout_.find('\n'));
  co_return where.exit_code == 0 && dir.starts_with('/') ? dir : fallback_dir;
}

/// Lays `request` over a copy of a backend's settings `c` (a settings struct with image, env and
/// labels): its image when it names one, its variables and labels over the settings' own.
template <class Config>
void lay_request_over(Config& c, SandboxRequest& request) {
  if (!request.image.empty())
    c.image = request.image;
  for (auto& [k, v] : request.env)
    c.env[k] = std::move(v);
  for (auto& [k, v] : request.labels)
    c.labels[k] = std::move(v);
}

/// Starts the sandbox of `s`, a cloud backend's own state (its start(), runtime, sandbox_id, url
/// and token), told of each stage through `progress`; when the start fails, (s->*remove)()
/// removes what it made ("<undoing> the sandbox ID" when that fails too). Then hands it over:
/// the server's address, token and headers, and where sessions work (`working_dir`, else where
/// the sandbox starts processes, else `fallback_dir`).
template <class S>
asio::awaitable<StartedSandbox> start_cloud_sandbox(std::string_view kind, std::shared_ptr<S> s,
                                                    asio::awaitable<void> (S::*remove)(),
                                                    std::string undoing, std::string working_dir,
                                                    SandboxProgress progress,
                                                    std::string fallback_dir = "/") {
  s->report = [progress = std::move(progress)](DeploymentStage stage, std::string message) {
    if (progress)
      progress(DeploymentEvent{stage, std::move(message)});
  };
  auto clean_up = [s, remove]() -> asio::awaitable<void> {
    s->runtime.reset();
    auto removing = ((*s).*remove)();
    co_await std::move(removing);
  };
  auto undo = [s, undoing] { return undoing + " the sandbox " + s->sandbox_id; };
  auto starting = start_or_clean_up(kind, s->start(), std::move(clean_up), std::move(undo));
  co_await std::move(starting);
  StartedSandbox started;
  started.id = s->sandbox_id;
  started.url = s->url;
  started.token = s->token;
  started.headers = s->runtime->config().client.headers;
  auto finding = working_dir_of(*s->runtime, std::move(working_dir), std::move(fallback_dir));
  started.working_dir = co_await std::move(finding);
  co_return started;
}

/// Awaits `op`; whatever it throws becomes an Error (a DeploymentStartupError unless said) of
/// `prefix` and its message ("daytona: cannot delete sandbox ID: " + what Daytona said).
template <class Error = DeploymentStartupError, class T>
asio::awaitable<T> failing_as(std::string prefix, asio::awaitable<T> op) {
  std::string failure;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(op);
      co_return;
    } else {
      co_return co_await std::move(op);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  throw Error(prefix + failure);
}

/// True when `labels` holds every one of `wanted`.
inline bool has_labels(const std::map<std::string, std::string>& labels,
                       const std::map<std::string, std::string>& wanted) {
  for (const auto& [k, v] : wanted) {
    const auto it = labels.find(k);
    if (it == labels.end() || it->second != v)
      return false;
  }
  return true;
}

}  // namespace rex::detail
