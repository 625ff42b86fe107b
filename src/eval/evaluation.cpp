#include <rex/backends/local/local_config.hpp>
#include <rex/backends/remote/remote_config.hpp>
#include <rex/core/log.hpp>
#include <rex/core/outcome.hpp>
#include <rex/eval/evaluation.hpp>
#include <rex/eval/instance_runner.hpp>
#include <rex/eval/results_log.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include "core/clock.hpp"
#include "core/offload.hpp"

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace rex {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

using rex::detail::seconds_since;

void fresh_directory(const std::string& path) {
  fs::remove_all(path);
  fs::create_directories(path);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

struct LogFailure {
  void operator()(std::exception_ptr error) const {
    if (error)
      logging::error("evaluation: shutting a sandbox pool down failed: {}",
                     detail::describe(error));
  }
};

// Where one instance runs.
struct Plan {
  SandboxPool* pool = nullptr;
  std::string working_dir{};  // local deployments: a fresh directory on this machine
};

}  // namespace

struct Evaluation::Impl {
  asio::any_io_executor executor;
  EvaluationConfig config;
  std::string output_dir;
  std::vector<EvalInstance> instances;
  std::unique_ptr<ResultsLog> log;
  std::map<std::string, std::unique_ptr<SandboxPool>> pools;  // by the config's JSON text
  std::vector<Plan> plans;                                    // one per instance
  std::vector<std::size_t> pending;                           // indices of the instances to run
  std::size_t skipped = 0;
  std::size_t retried = 0;
  std::size_t running = 0;
  bool stopping = false;
  bool ran = false;
  EvaluationObserver observer;
  EvaluationReport report;
  std::exception_ptr fatal;  // a result that could not be written
  // Last: destroyed (joined) first, while what its tasks use still exists.
  asio::thread_pool disk{1};

  Impl(asio::any_io_executor ex, EvaluationConfig cfg, std::vector<EvalInstance> list)
      : executor(std::move(ex)), config(std::move(cfg)), instances(std::move(list)) {
    if (config.parallel == 0)
      throw std::invalid_argument("EvaluationConfig.parallel: must be at least 1");
    output_dir = fs::absolute(config.output_dir).lexically_normal().string();
    while (output_dir.size() > 1 && output_dir.back() == '/')
      output_dir.pop_back();
    plan_instances();
    log = std::make_unique<ResultsLog>(output_dir + "/results.jsonl");
    if (config.retry_errors) {
      std::set<std::string> ids;
      for (const auto& i : instances)
        ids.insert(i.id);
      retried = log->remove_if([&ids](const EvalResult& r) {
        return r.status == EvalStatus::error && ids.contains(r.id);
      });
    }
    for (std::size_t i = 0; i < instances.size(); ++i) {
      if (log->contains(instances[i].id))
        ++skipped;
      else
        pending.push_back(i);
    }
  }

  // Each instance's deployment config, one pool per distinct config; every problem at once.
  void plan_instances() {
    std::vector<std::string> problems;
    plans.resize(instances.size());
    for (std::size_t i = 0; i < instances.size(); ++i) {
      const EvalInstance& instance = instances[i];
      const std::string where =
          fmt::format("instance \"{}\" (line {})", instance.id, instance.line);
      DeploymentConfig deployment = instance.deployment ? *instance.deployment : config.deployment;
      if (instance.image) {
        try {
          deployment = with_image(deployment, *instance.image);
        } catch (const DeploymentConfigError& e) {
          problems.push_back(fmt::format("{}: image: {}", where, e.what()));
          continue;
        }
      }
      if (auto* local = deployment.get_if<LocalDeploymentConfig>()) {
        // The config's working_dir is the root; each instance gets a directory of its own.
        const fs::path root = local->working_dir.empty() ? fs::path(output_dir) / "work"
                                                         : fs::absolute(local->working_dir);
        plans[i].working_dir = (root / instance.id).lexically_normal().string();
        local->working_dir.clear();
      }
      const std::string key = boost::json::serialize(to_json(deployment));
      auto found = pools.find(key);
      if (found == pools.end()) {
        try {
          make_deployment(executor, deployment);  // refuses what cannot work, starts nothing
        } catch (const std::exception& e) {
          problems.push_back(fmt::format("{}: deployment: {}", where, e.what()));
          continue;
        }
        SandboxPoolConfig pool;
        pool.deployment = deployment;
        // Stopping a remote deployment closes every session of its server.
        pool.max_sandboxes = deployment.holds<RemoteDeploymentConfig>() ? 1 : config.parallel;
        pool.warm_spares = 0;
        pool.start_attempts = std::max(config.start_attempts, 1);
        pool.return_policy = ReturnPolicy::stop;
        pool.health_check_on_acquire = false;  // just started, never used
        found = pools.emplace(key, std::make_unique<SandboxPool>(executor, std::move(pool))).first;
      }
      plans[i].pool = found->second.get();
    }
    if (!problems.empty())
      throw EvalInstanceError(std::move(problems));
  }

  void stop() {
    if (stopping)
      return;
    stopping = true;
    for (auto& [key, pool] : pools)
      asio::co_spawn(executor, pool->shutdown(), LogFailure{});
  }

  static EvalResult start_failure(const EvalInstance& instance, const std::exception_ptr& error) {
    EvalResult r;
    r.id = instance.id;
    r.status = EvalStatus::error;
    r.error = EvalError{"start", exception_type_name(error), detail::describe(error)};
    return r;
  }

  static asio::awaitable<void> run_one(std::shared_ptr<Impl> self, std::size_t index) {
    if (self->stopping)
      co_return;
    const EvalInstance& instance = self->instances[index];
    const Plan& plan = self->plans[index];
    ++self->running;
    if (self->observer.started)
      self->observer.started(instance);
    const auto started = std::chrono::system_clock::now();
    const auto t0 = Clock::now();
    const std::string artifacts_dir = self->output_dir + "/artifacts/" + instance.id;

    auto prepare = [artifacts_dir, work = plan.working_dir] {
      fresh_directory(artifacts_dir);  // nothing left from an attempt that did not finish
      if (!work.empty())
        fresh_directory(work);
      return true;
    };
    auto preparing = detail::offload(self->disk, self->executor, std::move(prepare));
    const auto prepared = co_await capture(std::move(preparing));
    std::exception_ptr failure = prepared.error();
    SandboxLease lease;
    if (!failure) {
      auto acquiring = plan.pool->acquire();
      auto acquired = co_await capture(std::move(acquiring));
      if (acquired)
        lease = std::move(*acquired);
      failure = acquired.error();
    }
    const double start_seconds = seconds_since(t0);

    EvalRun run;
    Runtime* runtime = nullptr;
    if (!failure) {
      auto reached = capture([&lease] { return &lease.runtime(); });  // fails after stop()
      if (reached)
        runtime = *reached;
      failure = reached.error();
    }
    if (runtime) {
      EvalRunnerSettings settings;
      settings.artifacts_dir = artifacts_dir;
      settings.artifacts_prefix = "artifacts/" + instance.id;
      settings.working_dir = plan.working_dir;
      settings.default_timeout = self->config.timeout;
      settings.setup_timeout = self->config.setup_timeout;
      settings.output_limit = self->config.output_limit;
      settings.log_limit = self->config.log_limit;
      run = co_await run_eval_instance(*runtime, instance, settings);
      run.result.times.start = start_seconds + run.result.times.start.value_or(0);
    } else {
      run.result = start_failure(instance, failure);
      run.result.times.start = start_seconds;
    }
    // Judged before stop() could disturb it: then it is a result (a rerun skips it).
    const bool complete = !self->stopping;
    if (lease) {
      const auto t1 = Clock::now();
      try {
        co_await lease.release();  // the slot is held until the sandbox has stopped
      } catch (const std::exception& e) {
        logging::warn("evaluation: {}: releasing the sandbox: {}", instance.id, e.what());
      }
      run.result.times.teardown = run.result.times.teardown.value_or(0) + seconds_since(t1);
    }
    --self->running;
    if (!complete || self->fatal)
      co_return;

    run.result.started = format_utc_timestamp(started);
    run.result.finished = format_utc_timestamp(std::chrono::system_clock::now());
    auto record = [log = self->log.get(), result = run.result, artifacts_dir,
                   setup_log = std::move(run.setup_log), run_log = std::move(run.run_log),
                   work = self->config.keep_work ? std::string() : plan.working_dir] {
      if (!setup_log.empty())
        write_text(artifacts_dir + "/" + std::string(eval_setup_log), setup_log);
      if (result.times.run)
        write_text(artifacts_dir + "/" + std::string(eval_run_log), run_log);
      if (!work.empty()) {
        std::error_code ignored;
        fs::remove_all(work, ignored);
      }
      log->append(result);
      return true;
    };
    auto recording = detail::offload(self->disk, self->executor, std::move(record));
    const auto recorded = co_await capture(std::move(recording));
    if (!recorded) {
      if (!self->fatal)
        self->fatal = recorded.error();
      self->stop();
      co_return;
    }
    self->report.results.push_back(run.result);
    if (self->observer.finished)
      self->observer.finished(instance, run.result);
  }

  static asio::awaitable<EvaluationReport> run(std::shared_ptr<Impl> self,
                                               EvaluationObserver observer) {
    if (self->ran)
      throw std::logic_error("Evaluation::run: called twice");
    self->ran = true;
    self->observer = std::move(observer);
    const auto t0 = Clock::now();
    std::vector<std::size_t> items = self->pending;
    auto job = [self](std::size_t& index) { return run_one(self, index); };
    if (!items.empty())
      co_await fan_out(std::move(items), self->config.parallel, std::move(job));
    for (auto& [key, pool] : self->pools)
      co_await pool->shutdown();
    self->report.stopped = self->stopping;
    self->report.unfinished = self->pending.size() - self->report.results.size();
    self->report.wall_seconds = seconds_since(t0);
    if (self->fatal)
      std::rethrow_exception(self->fatal);
    co_return std::move(self->report);
  }
};

Evaluation::Evaluation(asio::any_io_executor executor, EvaluationConfig config,
                       std::vector<EvalInstance> instances)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config), std::move(instances))) {}

Evaluation::~Evaluation() = default;

std::size_t Evaluation::total() const noexcept {
  return impl_->instances.size();
}
std::size_t Evaluation::pending() const noexcept {
  return impl_->pending.size();
}
std::size_t Evaluation::skipped() const noexcept {
  return impl_->skipped;
}
std::size_t Evaluation::retried() const noexcept {
  return impl_->retried;
}
std::size_t Evaluation::repaired_bytes() const noexcept {
  return impl_->log->repaired_bytes();
}
std::size_t Evaluation::running() const noexcept {
  return impl_->running;
}
const std::string& Evaluation::results_path() const noexcept {
  return impl_->log->path();
}

asio::awaitable<EvaluationReport> Evaluation::run(EvaluationObserver observer) {
  return Impl::run(impl_, std::move(observer));
}

void Evaluation::stop() {
  impl_->stop();
}

std::vector<EvalResult> Evaluation::recorded() const {
  std::vector<EvalResult> out;
  for (const auto& instance : impl_->instances) {
    const auto& records = impl_->log->records();
    if (auto it = records.find(instance.id); it != records.end())
      out.push_back(it->second);
  }
  return out;
}

}  // namespace rex
