#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/timeout.hpp>
#include <rex/deployment/sandbox_deployment.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/session/session_state.hpp>

#include "deployment/sandbox_runtime.hpp"

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <rex/core/bounded.hpp>
#include <rex/protocol/exceptions.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <utility>

namespace rex {

asio::awaitable<std::optional<std::string>> SandboxBackend::lost(std::string id) {
  (void)id;
  co_return std::nullopt;
}

asio::awaitable<void> SandboxBackend::refresh_client(std::string url) {
  (void)url;
  co_return;
}

std::string_view operation_name(SandboxOperation operation) noexcept {
  switch (operation) {
    case SandboxOperation::checkpoint:
      return "checkpoint";
    case SandboxOperation::pause:
      return "pause";
    case SandboxOperation::metrics:
      return "metrics";
    case SandboxOperation::build:
      return "build";
  }
  return "unknown";
}

namespace {
[[noreturn]] void unsupported(const SandboxBackend& backend, std::string_view what) {
  throw OperationUnsupportedError(fmt::format("the {} backend cannot {}", backend.name(), what));
}
}  // namespace

asio::awaitable<SandboxSnapshot> SandboxBackend::checkpoint(std::string,
                                                            std::map<std::string, std::string>) {
  unsupported(*this, "checkpoint a sandbox");
  co_return SandboxSnapshot{};
}

asio::awaitable<void> SandboxBackend::remove_checkpoint(std::string) {
  unsupported(*this, "remove a checkpoint");
  co_return;
}

asio::awaitable<std::vector<SandboxInfo>> SandboxBackend::list_checkpoints(
    std::map<std::string, std::string>) {
  co_return std::vector<SandboxInfo>{};  // none: it makes none
}

asio::awaitable<std::string> SandboxBackend::build_image(ImageBuild) {
  unsupported(*this, "build an image");
  co_return std::string();
}

asio::awaitable<std::optional<std::string>> SandboxBackend::image_id(std::string) {
  co_return std::nullopt;  // it keeps no images
}

asio::awaitable<std::vector<SandboxInfo>> SandboxBackend::list_built_images(
    std::map<std::string, std::string>) {
  co_return std::vector<SandboxInfo>{};  // none: it builds none
}

asio::awaitable<void> SandboxBackend::pause(std::string) {
  unsupported(*this, "pause a sandbox");
  co_return;
}

asio::awaitable<void> SandboxBackend::resume(std::string) {
  unsupported(*this, "resume a sandbox");
  co_return;
}

asio::awaitable<SandboxMetrics> SandboxBackend::metrics(std::string) {
  unsupported(*this, "measure a sandbox");
  co_return SandboxMetrics{};
}

SandboxDeployment::SandboxDeployment(asio::any_io_executor executor,
                                     std::unique_ptr<SandboxBackend> backend,
                                     SandboxRequest request)
    : SandboxDeployment(Shared{}, std::move(executor),
                        std::shared_ptr<SandboxBackend>(std::move(backend)), std::move(request)) {}

SandboxDeployment::SandboxDeployment(Shared, asio::any_io_executor executor,
                                     std::shared_ptr<SandboxBackend> backend,
                                     SandboxRequest request)
    : executor_(std::move(executor)),
      backend_(std::move(backend)),
      request_(std::move(request)),
      hooks_(std::make_shared<SandboxProgress>(
          [this](const DeploymentEvent& event) { emit(event); })) {
  if (request_.deployment_id.empty())
    request_.deployment_id = random_hex(6);
}

SandboxDeployment::~SandboxDeployment() {
  *hooks_ = nullptr;  // a start still running reports to nobody
  if (!sandbox_ || stopped_ || released_)
    return;
  // In the background: the sandbox goes though nobody waits for it (a failure leaves it to its
  // own lifetime and to `rex gc`).
  asio::co_spawn(
      executor_,
      [backend = backend_, id = sandbox_->id]() -> asio::awaitable<void> {
        try {
          auto destroying = backend->destroy(id);
          co_await std::move(destroying);
        } catch (const std::exception&) {
        }
      },
      asio::detached);
}

const std::string& SandboxDeployment::deployment_id() const noexcept {
  return request_.deployment_id;
}

asio::awaitable<void> SandboxDeployment::start() {
  if (stopped_)
    throw DeploymentStartupError(
        fmt::format("{} deployment: cannot start again after stop()", backend_->name()));
  if (started_)
    co_return;
  SandboxRequest request = request_;
  request.progress = relay();
  auto creating = backend_->create(std::move(request));
  StartedSandbox made = co_await std::move(creating);
  sandbox_ = std::make_unique<StartedSandbox>(std::move(made));
  runtime_ = std::make_unique<detail::SandboxRuntime>(executor_, backend_, sandbox_->id,
                                                      sandbox_->url, client_of(*sandbox_));
  if (fork_of_) {
    std::exception_ptr failure;
    try {
      auto restoring = restore_sessions(*fork_of_);
      co_await std::move(restoring);
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      auto destroying = capture(backend_->destroy(sandbox_->id));
      (void)co_await std::move(destroying);
      std::rethrow_exception(failure);
    }
  }
  started_ = true;
  emit(DeploymentStage::ready,
       fmt::format("rex-server at {} (sandbox {})", sandbox_->url, sandbox_->id));
}

asio::awaitable<void> SandboxDeployment::stop() {
  if (stopped_)
    co_return;
  stopped_ = true;
  const bool was_started = started_;
  started_ = false;
  if (!sandbox_)
    co_return;  // never created: a failed create removed what it made
  emit(DeploymentStage::stopping, "removing the sandbox " + sandbox_->id);
  if (pause_ == Pause::ended) {
    // Nothing runs: the pause's checkpoint is all that is left of the sandbox.
    own_images_.push_back(pause_checkpoint_->image);
    current_image_.clear();
    auto removing = remove_own_images();
    co_await std::move(removing);
    emit(DeploymentStage::stopped, "removed the paused sandbox's checkpoint");
    co_return;
  }
  if (was_started && runtime_ && pause_ == Pause::none) {
    // The sandbox may be gone already, its sessions with it: a few seconds, not the client's
    // whole patience.
    auto closing = with_timeout(runtime_->remote().close(), std::chrono::seconds(10));
    auto closed = capture(std::move(closing));
    (void)co_await std::move(closed);
    runtime_->remote().close_idle_connections();
  }
  auto destroying = backend_->destroy(sandbox_->id);
  co_await std::move(destroying);
  // The sandboxes rewinds left to go in the background: gone before stop() returns.
  for (const auto& id : std::exchange(retiring_, {})) {
    auto retiring = capture(backend_->destroy(id));
    (void)co_await std::move(retiring);
  }
  current_image_.clear();
  auto removing = remove_own_images();
  co_await std::move(removing);
  emit(DeploymentStage::stopped, "removed the sandbox " + sandbox_->id);
}

asio::awaitable<IsAliveResponse> SandboxDeployment::is_alive() {
  if (!started_)
    co_return IsAliveResponse{false, fmt::format("{} deployment: {}", backend_->name(),
                                                 stopped_ ? "stopped" : "not started")};
  auto asking = runtime_->is_alive();
  co_return co_await std::move(asking);
}

Runtime& SandboxDeployment::runtime() {
  if (!started_)
    throw DeploymentNotStartedError(
        fmt::format("{} deployment: {}", backend_->name(), stopped_ ? "stopped" : "not started"));
  return *runtime_;
}

bool SandboxDeployment::started() const noexcept {
  return started_;
}

const StartedSandbox& SandboxDeployment::sandbox() const {
  if (!sandbox_)
    throw DeploymentNotStartedError(fmt::format("{} deployment: not started", backend_->name()));
  return *sandbox_;
}

const std::string& SandboxDeployment::sandbox_id() const noexcept {
  static const std::string none;
  return sandbox_ ? sandbox_->id : none;
}

const std::string& SandboxDeployment::url() const noexcept {
  static const std::string none;
  return sandbox_ ? sandbox_->url : none;
}

SandboxHandoff SandboxDeployment::release() {
  if (!started_)
    throw DeploymentNotStartedError(
        fmt::format("{} deployment: {}", backend_->name(), stopped_ ? "stopped" : "not started"));
  runtime_->remote().close_idle_connections();
  started_ = false;
  stopped_ = true;
  released_ = true;
  return SandboxHandoff{sandbox_->id, sandbox_->url, sandbox_->token, sandbox_->headers};
}

// ---- checkpoints ----------------------------------------------------------------------------

namespace {

namespace labels_of_checkpoint {
constexpr const char* id = "rex.checkpoint";
constexpr const char* parent = "rex.checkpoint.parent";
constexpr const char* sandbox = "rex.checkpoint.sandbox";
}  // namespace labels_of_checkpoint

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void SandboxDeployment::require(SandboxOperation operation, std::string_view what) const {
  if (!backend_->can(operation))
    throw OperationUnsupportedError(
        fmt::format("the {} backend cannot {}", backend_->name(), what));
}

void SandboxDeployment::require_started(std::string_view what) const {
  if (!started_)
    throw DeploymentNotStartedError(fmt::format("{} deployment: cannot {}: {}", backend_->name(),
                                                what, stopped_ ? "stopped" : "not started"));
}

bool SandboxDeployment::paused() const noexcept {
  return pause_ != Pause::none;
}

asio::awaitable<Checkpoint> SandboxDeployment::checkpoint() {
  require(SandboxOperation::checkpoint, "checkpoint a sandbox");
  require_started("checkpoint the sandbox");
  if (pause_ == Pause::ended)
    co_return *pause_checkpoint_;  // the sandbox as it is now
  Checkpoint cp;
  cp.id = "ckpt-" + random_hex(8);
  cp.parent = origin_;
  cp.sandbox = request_.deployment_id;
  cp.backend = std::string(backend_->name());
  cp.working_dir = sandbox_->working_dir;
  // A frozen sandbox's shells run no capture: it is thawed for it (a few milliseconds) and
  // frozen again, so that a pause costs no more than the engine's.
  if (pause_ == Pause::frozen) {
    auto thawing = backend_->resume(sandbox_->id);
    co_await std::move(thawing);
  }
  std::exception_ptr capture_failure;
  CaptureSessionsResponse sessions;
  try {
    auto capturing = runtime_->capture_sessions(CaptureSessionsRequest{});
    sessions = co_await std::move(capturing);
  } catch (...) {
    capture_failure = std::current_exception();
  }
  if (pause_ == Pause::frozen) {
    auto freezing = backend_->pause(sandbox_->id);
    co_await std::move(freezing);
  }
  if (capture_failure)
    std::rethrow_exception(capture_failure);
  cp.sessions = std::move(sessions.sessions);
  cp.not_carried = std::move(sessions.not_carried);
  std::map<std::string, std::string> labels{{labels_of_checkpoint::id, cp.id},
                                            {labels_of_checkpoint::parent, cp.parent},
                                            {labels_of_checkpoint::sandbox, cp.sandbox}};
  auto saving = backend_->checkpoint(sandbox_->id, std::move(labels));
  SandboxSnapshot snapshot = co_await std::move(saving);
  cp.image = std::move(snapshot.image);
  cp.created_at = unix_now();
  origin_ = cp.id;
  lineage_.insert(cp.id);
  co_return cp;
}

asio::awaitable<void> SandboxDeployment::restore_sessions(const Checkpoint& from) {
  if (from.sessions.empty())
    co_return;
  RestoreSessionsRequest request{.sessions = from.sessions};
  // A sandbox that works elsewhere than the checkpoint's did: the paths move with it.
  if (sandbox_ && !from.working_dir.empty() && sandbox_->working_dir != from.working_dir) {
    for (auto& state : request.sessions) {
      state.state = moved_paths(state.state, from.working_dir, sandbox_->working_dir);
      state.cwd = moved_paths(state.cwd, from.working_dir, sandbox_->working_dir);
    }
  }
  auto restoring = runtime_->restore_sessions(std::move(request));
  (void)co_await std::move(restoring);
}

asio::awaitable<std::vector<std::unique_ptr<Deployment>>> SandboxDeployment::fork(Checkpoint from,
                                                                                  int count) {
  auto forking = fork_sandboxes(std::move(from), count);
  auto forks = co_await std::move(forking);
  std::vector<std::unique_ptr<Deployment>> out;
  for (auto& f : forks)
    out.push_back(std::move(f));
  co_return out;
}

asio::awaitable<std::vector<std::unique_ptr<SandboxDeployment>>> SandboxDeployment::fork_sandboxes(
    Checkpoint from, int count) {
  require(SandboxOperation::checkpoint, "fork a sandbox");
  if (count < 1)
    throw std::invalid_argument(fmt::format("a fork needs a count of at least 1, got {}", count));
  if (from.image.empty() || from.backend != backend_->name())
    throw std::invalid_argument(
        fmt::format("checkpoint {} is not one of the {} backend's (it is of {})",
                    from.id.empty() ? "(no id)" : from.id, backend_->name(),
                    from.backend.empty() ? "no backend" : from.backend));
  std::vector<std::unique_ptr<SandboxDeployment>> forks;
  for (int i = 0; i < count; ++i)
    forks.push_back(make_fork(executor_, backend_, request_, from));
  std::exception_ptr failure;
  std::vector<SandboxDeployment*> all;
  for (auto& f : forks)
    all.push_back(f.get());
  auto start_one = [&failure](SandboxDeployment* fork) -> asio::awaitable<void> {
    try {
      auto starting = fork->start();  // restores the checkpoint's sessions
      co_await std::move(starting);
    } catch (...) {
      if (!failure)
        failure = std::current_exception();
    }
  };
  auto starting = for_each_bounded(all, all.size(), start_one);
  co_await std::move(starting);
  if (failure) {
    auto stop_one = [](SandboxDeployment* fork) -> asio::awaitable<void> {
      auto stopping = capture(fork->stop());
      (void)co_await std::move(stopping);
    };
    auto stopping = for_each_bounded(all, all.size(), stop_one);
    co_await std::move(stopping);
    std::rethrow_exception(failure);
  }
  co_return forks;
}

std::function<std::unique_ptr<Deployment>(asio::any_io_executor)> SandboxDeployment::fork_factory(
    Checkpoint from) const {
  require(SandboxOperation::checkpoint, "fork a sandbox");
  if (from.image.empty() || from.backend != backend_->name())
    throw std::invalid_argument(
        fmt::format("checkpoint {} is not one of the {} backend's", from.id, backend_->name()));
  return [backend = backend_, request = request_,
          from = std::move(from)](asio::any_io_executor ex) -> std::unique_ptr<Deployment> {
    return make_fork(std::move(ex), backend, request, from);
  };
}

std::unique_ptr<SandboxDeployment> SandboxDeployment::make_fork(
    asio::any_io_executor executor, std::shared_ptr<SandboxBackend> backend,
    const SandboxRequest& original, const Checkpoint& from) {
  SandboxRequest request = original;
  request.deployment_id = random_hex(6);
  request.name = "rex-" + request.deployment_id;  // never the original's fixed name
  request.image = from.image;
  request.own_image = true;
  request.progress = {};
  auto fork = std::unique_ptr<SandboxDeployment>(  // the constructor is private
      new SandboxDeployment(Shared{}, std::move(executor), std::move(backend), std::move(request)));
  fork->origin_ = from.id;
  fork->lineage_.insert(from.id);
  fork->fork_of_ = from;  // start() restores its sessions
  return fork;
}

SandboxProgress SandboxDeployment::relay() const {
  return [hooks = hooks_](const DeploymentEvent& event) {
    if (*hooks)
      (*hooks)(event);
  };
}

std::unique_ptr<RemoteRuntime> SandboxDeployment::client_of(const StartedSandbox& sandbox) const {
  RemoteRuntimeConfig rc;
  rc.url = sandbox.url;
  rc.auth_token = sandbox.token;
  rc.client.headers = sandbox.headers;
  backend_->configure_client(rc.url, rc.client);
  return std::make_unique<RemoteRuntime>(executor_, std::move(rc));
}

asio::awaitable<void> SandboxDeployment::replace_from(const Checkpoint& from) {
  SandboxRequest request = request_;
  request.name = "rex-" + request_.deployment_id + "-" + random_hex(3);
  request.image = from.image;
  request.own_image = true;
  request.progress = relay();
  auto creating = backend_->create(std::move(request));
  StartedSandbox made = co_await std::move(creating);
  auto old = std::move(sandbox_);
  sandbox_ = std::make_unique<StartedSandbox>(std::move(made));
  runtime_->retarget(sandbox_->id, sandbox_->url, client_of(*sandbox_));
  std::exception_ptr failure;
  try {
    auto restoring = restore_sessions(from);
    co_await std::move(restoring);
  } catch (...) {
    failure = std::current_exception();
  }
  // The old sandbox goes either way (an ended pause's is gone already); a new one whose
  // sessions could not be restored goes too, and the error says why.
  // Not waited for: the sandbox answers from its new place already (its own images go at a
  // later rewind or at stop, once nothing starts from them).
  if (old && pause_ != Pause::ended) {
    retiring_.push_back(old->id);
    asio::co_spawn(
        executor_,
        [backend = backend_, id = old->id]() -> asio::awaitable<void> {
          auto destroying = capture(backend->destroy(id));
          (void)co_await std::move(destroying);
        },
        asio::detached);
  }
  current_image_ = from.image;
  auto removing = remove_own_images();
  co_await std::move(removing);
  if (failure)
    std::rethrow_exception(failure);
}

asio::awaitable<void> SandboxDeployment::remove_own_images() {
  std::vector<std::string> kept;
  for (auto& image : own_images_) {
    if (image == current_image_) {
      kept.push_back(std::move(image));
      continue;
    }
    auto removing = capture(backend_->remove_checkpoint(image));
    if (!(co_await std::move(removing)))
      kept.push_back(std::move(image));
  }
  own_images_ = std::move(kept);
}

asio::awaitable<void> SandboxDeployment::rewind(Checkpoint to) {
  require(SandboxOperation::checkpoint, "rewind a sandbox");
  require_started("rewind the sandbox");
  if (to.backend != backend_->name() || to.image.empty())
    throw std::invalid_argument(
        fmt::format("checkpoint {} is not one of the {} backend's", to.id, backend_->name()));
  if (to.sandbox != request_.deployment_id && !lineage_.contains(to.id))
    throw std::invalid_argument(fmt::format(
        "checkpoint {} is of sandbox {}, not of this one ({}) nor the one it was forked from",
        to.id, to.sandbox, request_.deployment_id));
  if (pause_ == Pause::frozen) {
    auto thawing = backend_->resume(sandbox_->id);
    co_await std::move(thawing);
  }
  auto replacing = replace_from(to);
  co_await std::move(replacing);
  if (pause_ == Pause::ended) {
    own_images_.push_back(pause_checkpoint_->image);
    pause_checkpoint_.reset();
    auto removing = remove_own_images();
    co_await std::move(removing);
  }
  pause_ = Pause::none;
  origin_ = to.id;
  lineage_.insert(to.id);
  emit(DeploymentStage::ready,
       fmt::format("rewound to checkpoint {} (sandbox {})", to.id, sandbox_->id));
}

asio::awaitable<void> SandboxDeployment::pause(bool keep_memory) {
  if (keep_memory)
    require(SandboxOperation::pause, "pause a sandbox");
  else
    require(SandboxOperation::checkpoint, "pause a sandbox without its memory");
  require_started("pause the sandbox");
  if (pause_ != Pause::none)
    co_return;
  if (keep_memory) {
    runtime_->remote().close_idle_connections();
    auto freezing = backend_->pause(sandbox_->id);
    co_await std::move(freezing);
    pause_ = Pause::frozen;
    co_return;
  }
  auto saving = checkpoint();
  Checkpoint cp = co_await std::move(saving);
  runtime_->remote().close_idle_connections();
  auto destroying = backend_->destroy(sandbox_->id);
  co_await std::move(destroying);
  pause_checkpoint_ = std::move(cp);
  pause_ = Pause::ended;
}

asio::awaitable<void> SandboxDeployment::resume() {
  require_started("resume the sandbox");
  if (pause_ == Pause::none)
    co_return;
  if (pause_ == Pause::frozen) {
    auto thawing = backend_->resume(sandbox_->id);
    co_await std::move(thawing);
    pause_ = Pause::none;
    co_return;
  }
  const Checkpoint cp = *pause_checkpoint_;
  auto replacing = replace_from(cp);
  co_await std::move(replacing);
  pause_ = Pause::none;
  pause_checkpoint_.reset();
  // Nobody else holds the pause's checkpoint: its image goes once the sandbox started from it
  // goes.
  own_images_.push_back(cp.image);
  origin_ = cp.parent;
  lineage_.erase(cp.id);
}

asio::awaitable<SandboxMetrics> SandboxDeployment::metrics() {
  require(SandboxOperation::metrics, "measure a sandbox");
  require_started("measure the sandbox");
  if (pause_ == Pause::ended)
    co_return SandboxMetrics{.timestamp = unix_now()};  // nothing runs, nothing is used
  auto measuring = backend_->metrics(sandbox_->id);
  co_return co_await std::move(measuring);
}

asio::awaitable<void> SandboxDeployment::remove_checkpoint(Checkpoint checkpoint) {
  require(SandboxOperation::checkpoint, "remove a checkpoint");
  if (checkpoint.backend != backend_->name())
    throw std::invalid_argument(fmt::format("checkpoint {} is not one of the {} backend's",
                                            checkpoint.id, backend_->name()));
  if (pause_checkpoint_ && pause_checkpoint_->id == checkpoint.id)
    throw std::invalid_argument(fmt::format(
        "checkpoint {} is what the paused sandbox resumes from: resume or stop it first",
        checkpoint.id));
  auto removing = backend_->remove_checkpoint(checkpoint.image);
  co_await std::move(removing);
  lineage_.erase(checkpoint.id);
}

}  // namespace rex
