#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_config.hpp>
#include <rex/backends/gateway/gateway_config.hpp>
#include <rex/core/log.hpp>
#include <rex/core/outcome.hpp>
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/swebench/grading.hpp>
#include <rex/swebench/harness.hpp>
#include <rex/swebench/html_report.hpp>

#include "core/clock.hpp"
#include "swebench/py_text.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace rex::swebench {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace harness_detail {

using Clock = std::chrono::steady_clock;
using rex::detail::seconds_since;

// The harness's ways of applying a patch, in order (the tree reset between them).
const std::vector<std::vector<std::string>> apply_commands{
    {"git", "apply", "--verbose", std::string(container_patch_file)},
    {"git", "apply", "--verbose", "--3way", std::string(container_patch_file)},
    {"git", "apply", "--verbose", "--reject", std::string(container_patch_file)},
    {"patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i", std::string(container_patch_file)},
};

// Between two tries: the tree as it was.
const std::vector<std::string> reset_command{"/bin/bash", "-c",
                                             "git checkout -- . ; git clean -fd"};
// Whether the patch is there already (the tries can apply it and still exit non-zero).
const std::vector<std::string> reverse_check_command{"git", "apply", "--check", "--reverse",
                                                     std::string(container_patch_file)};
// The eval script, its output into a file in the sandbox, so that a run cut at its timeout
// keeps what it printed until then.
constexpr std::string_view output_in_sandbox = "/tmp/rex-swebench-output.txt";
const std::vector<std::string> eval_command{
    "/bin/bash", "-c", fmt::format("/bin/bash /eval.sh > {} 2>&1", output_in_sandbox)};

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "" : " ") + a;
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path.string());
}

// Written whole under another name, then renamed into place: a kill leaves the old file or the
// new one, never a part.
void write_file_atomically(const fs::path& path, std::string_view text) {
  fs::path temporary = path;
  temporary += ".rex-partial";
  write_file(temporary, text);
  fs::rename(temporary, path);
}

// run_instance.log, in the harness's line format ("2026-11-29 10:48:43,858 - INFO - ...").
class InstanceLog {
 public:
  explicit InstanceLog(const fs::path& path) : out_(path, std::ios::binary | std::ios::trunc) {}

  void info(std::string_view message) { line("INFO", message); }
  void warning(std::string_view message) { line("WARNING", message); }
  void error(std::string_view message) { line("ERROR", message); }

 private:
  void line(std::string_view level, std::string_view message) {
    const auto now = std::chrono::system_clock::now();
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    out_ << fmt::format("{:%Y-%m-%d %H:%M:%S},{:03d} - {} - {}\n",
                        fmt::localtime(std::chrono::system_clock::to_time_t(now)), ms, level,
                        message);
    out_.flush();
  }
  std::ofstream out_;
};

struct LogFailure {
  void operator()(std::exception_ptr error) const {
    if (error)
      logging::error("swebench: shutting a sandbox pool down failed: {}", detail::describe(error));
  }
};

std::string first_line(std::string_view text) {
  const std::size_t end = text.find('\n');
  return std::string(end == std::string_view::npos ? text : text.substr(0, end));
}

// A step of an instance that ends it without a report, as the harness's EvaluationError does.
class InstanceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Plan {
  std::size_t instance = 0;  // index into the dataset
  SandboxPool* pool = nullptr;
};

// The engine a docker (or podman) deployment talks to.
docker::EngineConfig engine_config_of(const DockerDeploymentConfig& docker) {
  auto config = docker::engine_config_from_environment(docker.container_runtime);
  if (!docker.engine.empty())
    config.host = docker.engine;
  return config;
}

// Python's datetime.now(timezone.utc).isoformat(timespec="seconds").
std::string utc_now_iso() {
  return fmt::format(
      "{:%Y-%m-%dT%H:%M:%S}+00:00",
      fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

json::object outcome_json(const InstanceOutcome& o) {
  json::object out;
  out["instance_id"] = o.instance_id;
  out["status"] = o.status;
  out["verdict"] = o.verdict;
  out["error"] = o.error;
  out["f2p"] = json::array{o.f2p_passed, o.f2p_total};
  out["p2p"] = json::array{o.p2p_passed, o.p2p_total};
  out["seconds"] = o.seconds;
  out["phases"] = json::object{{"start", o.start_seconds},
                               {"patch", o.patch_seconds},
                               {"eval", o.eval_seconds},
                               {"stop", o.stop_seconds}};
  out["finished"] = utc_now_iso();
  return out;
}

}  // namespace harness_detail

using namespace harness_detail;

std::string deployment_name(const DeploymentConfig& config) {
  if (const auto* docker = config.get_if<DockerDeploymentConfig>();
      docker && docker->container_runtime == "podman")
    return "podman";
  return std::string(deployment_type(config));
}

std::string describe_unresolved(const HarnessConfig& config, const Prediction& p) {
  const fs::path run = fs::path(config.root) / run_evaluation_log_dir / config.run_id;
  const fs::path dir = run / model_directory(p.model_name_or_path) / p.instance_id;
  try {
    if (fs::exists(dir / log_report)) {
      const json::value report = json::parse(read_file(dir / log_report));
      const json::object& entry = report.at(p.instance_id).as_object();
      const json::value* tests = entry.if_contains("tests_status");
      if (!tests) {
        const json::value* why = entry.if_contains("infra_failure_reason");
        return why ? fmt::format("no test results ({})", std::string(why->as_string()))
                   : std::string("no test results in the output");
      }
      std::string out;
      for (const char* kind : {"FAIL_TO_PASS", "PASS_TO_PASS"}) {
        const json::array& failed = tests->at(kind).at("failure").as_array();
        if (failed.empty())
          continue;
        std::string names;
        for (std::size_t i = 0; i < failed.size() && i < 5; ++i)
          names += (i ? ", " : "") + std::string(failed[i].as_string());
        if (failed.size() > 5)
          names += fmt::format(" and {} more", failed.size() - 5);
        out += fmt::format("{}{} failing: {}", out.empty() ? "" : "; ", kind, names);
      }
      return out.empty() ? "resolved" : out;
    }
    // No report: the last thing rex recorded of it.
    std::ifstream in(run / fmt::format("rex.{}.jsonl", model_directory(p.model_name_or_path)));
    std::string line, error = "no report (it did not finish)";
    while (std::getline(in, line)) {
      json::error_code ec;
      const json::value v = json::parse(line, ec);
      if (!ec && v.is_object() && v.at("instance_id").as_string() == p.instance_id)
        error = std::string(v.at("error").as_string());
    }
    return error;
  } catch (const std::exception& e) {
    return fmt::format("its files cannot be read: {}", e.what());
  }
}

struct Harness::Impl {
  asio::any_io_executor executor;
  HarnessConfig config;
  std::vector<Instance> dataset;
  std::map<std::string, Prediction> predictions;  // by instance id
  std::vector<std::string> prediction_order;      // ids as the file gives them
  std::vector<std::size_t> full;                  // the dataset's instances the summary counts
  std::vector<Plan> plans;                        // what runs
  std::size_t completed = 0;
  std::size_t empty = 0;
  std::string model_dir;
  std::map<std::string, std::unique_ptr<SandboxPool>> pools;  // by image
  bool stopping = false;
  bool ran = false;
  HarnessObserver observer;
  HarnessReport report;
  json::object summary;
  std::string summary_file;
  std::string html_file;

  Impl(asio::any_io_executor ex, HarnessConfig cfg, std::vector<Instance> data,
       std::vector<Prediction> preds, std::vector<std::string> ids)
      : executor(std::move(ex)), config(std::move(cfg)), dataset(std::move(data)) {
    if (config.run_id.empty())
      throw InputError({"--run_id: a run needs an id"});
    if (config.run_id.find('/') != std::string::npos)
      throw InputError({"--run_id: may not hold a \"/\""});
    if (config.max_workers == 0)
      config.max_workers = 1;
    std::vector<std::string> problems;
    std::map<std::string, std::size_t> by_id;
    for (std::size_t i = 0; i < dataset.size(); ++i)
      by_id.emplace(dataset[i].instance_id, i);
    for (auto& p : preds) {
      if (!by_id.contains(p.instance_id))
        problems.push_back(
            fmt::format("{}: instance_id \"{}\" is not in the dataset", p.where, p.instance_id));
      prediction_order.push_back(p.instance_id);
      predictions.emplace(p.instance_id, std::move(p));
    }
    std::set<std::string> wanted;
    for (const auto& id : ids) {
      if (!by_id.contains(id))
        problems.push_back(fmt::format("--instance_ids: \"{}\" is not in the dataset", id));
      wanted.insert(id);
    }
    if (predictions.empty() && problems.empty())
      problems.push_back("no predictions");
    if (!problems.empty())
      throw InputError(std::move(problems));
    model_dir = model_directory(predictions.at(prediction_order.front()).model_name_or_path);

    for (std::size_t i = 0; i < dataset.size(); ++i) {
      if (wanted.empty() || wanted.contains(dataset[i].instance_id))
        full.push_back(i);
    }
    for (std::size_t i : full) {
      const Instance& instance = dataset[i];
      auto found = predictions.find(instance.instance_id);
      if (found == predictions.end())
        continue;
      const Prediction& p = found->second;
      const fs::path dir = log_dir(p);
      if (config.rewrite_reports) {
        if (fs::exists(dir / log_test_output))
          plans.push_back({i, nullptr});
        continue;
      }
      if (fs::exists(dir / log_report)) {
        ++completed;
        continue;
      }
      if (empty_patch(p)) {
        ++empty;
        continue;
      }
      plans.push_back({i, nullptr});
    }
    // A gateway's sandboxes come from its environments: which one has an instance's image is
    // asked in check_images().
    if (!config.rewrite_reports && !config.deployment.holds<GatewayDeploymentConfig>())
      plan_pools(problems);
    if (!problems.empty())
      throw InputError(std::move(problems));
  }

  fs::path log_dir(const Prediction& p) const {
    return fs::path(config.root) / run_evaluation_log_dir / config.run_id /
           model_directory(p.model_name_or_path) / p.instance_id;
  }

  // environments: image -> the gateway environment that has it (gateway deployments only).
  void plan_pools(std::vector<std::string>& problems,
                  const std::map<std::string, std::string>& environments = {}) {
    for (Plan& plan : plans) {
      const Instance& instance = dataset[plan.instance];
      auto found = pools.find(instance.image);
      if (found == pools.end()) {
        DeploymentConfig deployment;
        try {
          if (auto* gateway = config.deployment.get_if<GatewayDeploymentConfig>()) {
            auto environment = environments.find(instance.image);
            if (environment == environments.end()) {
              problems.push_back(fmt::format(
                  "{}: image: the gateway at {} has no environment with the image {}; add one to "
                  "its registry (environments/<name>.yaml with \"image: {}\")",
                  instance.where, gateway->url, instance.image, instance.image));
              continue;
            }
            GatewayDeploymentConfig with_environment = *gateway;
            with_environment.environment = environment->second;
            deployment = with_environment;
          } else {
            deployment = with_image(config.deployment, instance.image);
          }
          make_deployment(executor, deployment);  // refuses what cannot work, starts nothing
        } catch (const std::exception& e) {
          problems.push_back(fmt::format("{}: image: {}", instance.where, e.what()));
          continue;
        }
        SandboxPoolConfig pool;
        pool.deployment = deployment;
        pool.max_sandboxes = config.max_workers;
        pool.warm_spares = 0;
        pool.start_attempts = std::max(config.start_attempts, 1);
        pool.return_policy = ReturnPolicy::stop;
        pool.health_check_on_acquire = false;
        found =
            pools.emplace(instance.image, std::make_unique<SandboxPool>(executor, std::move(pool)))
                .first;
      }
      plan.pool = found->second.get();
    }
  }

  void stop() {
    if (stopping)
      return;
    stopping = true;
    for (auto& [image, pool] : pools)
      asio::co_spawn(executor, pool->shutdown(), LogFailure{});
  }

  // A command in the sandbox with stderr merged into stdout, as docker exec gives them.
  static asio::awaitable<CommandResponse> exec(Runtime& runtime, std::vector<std::string> argv,
                                               std::optional<std::string> cwd,
                                               std::optional<double> timeout = {}) {
    Command command;
    command.command = std::move(argv);
    command.cwd = std::move(cwd);
    command.merge_output_streams = true;
    command.timeout = timeout;
    co_return co_await runtime.execute(std::move(command));
  }

  // What the tree differs by (file modes aside), as the harness logs it before and after the
  // tests.
  static asio::awaitable<std::string> git_diff(Runtime& runtime) {
    std::vector<std::string> argv{"git", "-c", "core.fileMode=false", "diff"};
    const CommandResponse r =
        co_await exec(runtime, std::move(argv), std::string(container_workdir));
    co_return std::string(py::strip(r.stdout_));
  }

  // The steps of the harness's run_instance in a started sandbox, up to the graded report.
  static asio::awaitable<json::object> evaluate(std::shared_ptr<Impl> self, Runtime& runtime,
                                                const Instance& instance, const Prediction& p,
                                                const fs::path& dir, InstanceLog& log,
                                                InstanceOutcome& outcome) {
    const std::string workdir(container_workdir);
    auto t0 = Clock::now();
    const std::string patch = p.model_patch.value_or("");
    write_file(dir / "patch.diff", patch);
    log.info(fmt::format("Intermediate patch for {} written to {}, now applying to container...",
                         instance.instance_id, (dir / "patch.diff").string()));
    WriteFileRequest patch_file{patch, std::string(container_patch_file)};
    co_await runtime.write_file(std::move(patch_file));

    bool applied = false;
    std::string last_output;
    for (std::size_t attempt = 0; attempt < apply_commands.size(); ++attempt) {
      if (attempt)  // a failed try (--reject above all) leaves a half-applied tree
        co_await exec(runtime, reset_command, workdir);
      const CommandResponse r = co_await exec(runtime, apply_commands[attempt], workdir);
      last_output = r.stdout_;
      if (r.exit_code == 0) {
        log.info(fmt::format("{}:\n{}", apply_patch_pass, r.stdout_));
        applied = true;
        break;
      }
      log.info(fmt::format("Failed to apply patch to container: {}",
                           join_command(apply_commands[attempt])));
    }
    if (!applied) {
      // The tries can leave the patch applied while each of them exited non-zero.
      const CommandResponse r = co_await exec(runtime, reverse_check_command, workdir);
      if (r.exit_code == 0) {
        log.info(fmt::format("{}: verified already applied", apply_patch_pass));
        applied = true;
      }
    }
    if (!applied) {
      log.info(fmt::format("{}:\n{}", apply_patch_fail, last_output));
      throw InstanceError(fmt::format("{}:\n{}", apply_patch_fail, last_output));
    }
    const std::string before = co_await git_diff(runtime);
    log.info(fmt::format("Git diff before:\n{}", before));
    outcome.patch_seconds = seconds_since(t0);

    const std::vector<std::string> restore =
        co_await stage_assets(self, runtime, instance, dir, log);
    const std::string script = eval_script(instance, restore);
    write_file(dir / "eval.sh", script);
    log.info(fmt::format("Eval script for {} written to {}; copying to container...",
                         instance.instance_id, (dir / "eval.sh").string()));
    WriteFileRequest script_file{script, "/eval.sh"};
    co_await runtime.write_file(std::move(script_file));

    t0 = Clock::now();
    bool timed_out = false;
    try {
      co_await exec(runtime, eval_command, std::nullopt, static_cast<double>(self->config.timeout));
    } catch (const CommandTimeoutError&) {
      timed_out = true;
    }
    outcome.eval_seconds = seconds_since(t0);
    ReadFileRequest read;
    read.path = std::string(output_in_sandbox);
    read.errors = "replace";
    std::string test_output = (co_await runtime.read_file(read)).content;
    log.info(fmt::format("Test runtime: {} seconds", format_runtime(outcome.eval_seconds)));
    if (timed_out)
      test_output += fmt::format("\n\nTimeout error: {} seconds exceeded.", self->config.timeout);
    write_file(dir / log_test_output, test_output);
    log.info(fmt::format("Test output for {} written to {}", instance.instance_id,
                         (dir / log_test_output).string()));
    if (timed_out)
      throw InstanceError(fmt::format("Test timed out after {} seconds.", self->config.timeout));

    const std::string after = co_await git_diff(runtime);
    log.info(fmt::format("Git diff after:\n{}", after));
    if (after != before)
      log.info("Git diff changed after running eval script");
    log.info(fmt::format("Grading answer for {}...", instance.instance_id));
    co_return eval_report(instance, p, test_output);
  }

  // Python's f"{x:_.2f}": two decimals, "_" between thousands.
  static std::string format_runtime(double seconds) {
    std::string digits = fmt::format("{:.2f}", seconds);
    const std::size_t dot = digits.find('.');
    for (std::ptrdiff_t at = static_cast<std::ptrdiff_t>(dot) - 3; at > 0; at -= 3)
      if (std::isdigit(static_cast<unsigned char>(digits[static_cast<std::size_t>(at - 1)])))
        digits.insert(static_cast<std::size_t>(at), "_");
    return digits;
  }

  // An asset's bytes from its URL: file:// or a local path read here, http(s) fetched (as the
  // harness's urlopen does, 60 s at most).
  static asio::awaitable<std::string> fetch_asset(std::shared_ptr<Impl> self,
                                                  const std::string& url) {
    if (url.starts_with("file://") || url.starts_with("/"))
      co_return read_file(url.starts_with("file://") ? url.substr(7) : url);
    const std::size_t scheme = url.find("://");
    if (scheme == std::string::npos || !(url.starts_with("http://") || url.starts_with("https://")))
      throw std::runtime_error("not an http(s) or file URL");
    const std::size_t path = url.find('/', scheme + 3);
    http::ClientConfig cc;
    cc.timeout = std::chrono::seconds(60);
    http::Client client(self->executor, url.substr(0, path), cc);
    http::ClientRequest request;
    request.method = "GET";
    request.target = path == std::string::npos ? "/" : url.substr(path);
    const http::ClientResponse answer = co_await client.request(std::move(request));
    if (answer.status != 200)
      throw std::runtime_error(fmt::format("HTTP Error {}", answer.status));
    co_return answer.body;
  }

  // Image assets (binary files a text patch cannot carry): staged in the instance's log folder
  // and in the sandbox's /image_assets, restored into the tree by commands the eval script runs
  // right before its tests (after its git apply), as the harness does.
  static asio::awaitable<std::vector<std::string>> stage_assets(std::shared_ptr<Impl> self,
                                                                Runtime& runtime,
                                                                const Instance& instance,
                                                                const fs::path& dir,
                                                                InstanceLog& log) {
    std::vector<std::pair<std::string, std::string>> assets;  // (path, url)
    for (std::string_view key : {"test_patch", "patch"}) {
      const json::value* list = instance.image_assets.if_contains(key);
      if (!list || !list->is_array())
        continue;
      for (const auto& entry : list->as_array()) {
        const json::object* asset = entry.if_object();
        const json::value* path = asset ? asset->if_contains("path") : nullptr;
        if (!path || !path->is_string() || path->get_string().empty())
          continue;
        const json::value* url = asset->if_contains("url");
        assets.emplace_back(std::string(path->get_string()),
                            url && url->is_string() ? std::string(url->get_string()) : "");
      }
    }
    std::vector<std::string> restore;
    if (assets.empty())
      co_return restore;
    const fs::path staging = dir / "image_assets";
    fs::create_directories(staging);
    std::vector<std::string> mkdir{"mkdir", "-p", "/image_assets"};
    co_await exec(runtime, std::move(mkdir), std::nullopt);
    for (const auto& [path, url] : assets) {
      if (url.empty()) {
        log.warning(fmt::format("No asset for {} at {}", instance.instance_id, path));
        continue;
      }
      std::string data;
      try {
        data = co_await fetch_asset(self, url);
      } catch (const std::exception& e) {
        log.warning(fmt::format("Could not fetch image asset {}: {}", url, e.what()));
        continue;
      }
      std::string flat;
      for (char c : path)
        flat += c == '/' ? std::string("__") : std::string(1, c);
      write_file(staging / flat, data);
      UploadRequest upload{(staging / flat).string(), "/image_assets/" + flat};
      co_await runtime.upload(std::move(upload));
      restore.push_back(
          fmt::format("mkdir -p $(dirname {}) && cp /image_assets/{} {}", path, flat, path));
    }
    if (!restore.empty())
      log.info(
          fmt::format("Staged {} patch asset(s) for restore after git apply (0 from the "
                      "local mirror, {} fetched)",
                      restore.size(), restore.size()));
    co_return restore;
  }

  static asio::awaitable<void> run_one(std::shared_ptr<Impl> self, std::size_t plan_index) {
    if (self->stopping)
      co_return;
    const Plan plan = self->plans[plan_index];
    const Instance& instance = self->dataset[plan.instance];
    const Prediction& p = self->predictions.at(instance.instance_id);
    const fs::path dir = self->log_dir(p);
    InstanceOutcome outcome;
    outcome.instance_id = instance.instance_id;
    const auto t0 = Clock::now();
    if (self->observer.started)
      self->observer.started(instance);

    std::optional<json::object> graded;
    if (self->config.rewrite_reports) {
      try {
        graded = eval_report(instance, p, read_file(dir / log_test_output));
      } catch (const std::exception& e) {
        outcome.status = "error";
        outcome.error = first_line(e.what());
      }
    } else {
      fs::create_directories(dir);
      InstanceLog log(dir / log_instance);
      SandboxLease lease;
      try {
        auto acquiring = plan.pool->acquire();
        auto acquired = co_await capture(std::move(acquiring));
        if (!acquired)
          std::rethrow_exception(acquired.error());
        lease = std::move(*acquired);
        outcome.start_seconds = seconds_since(t0);
        log.info(fmt::format("Container for {} started: {}", instance.instance_id, instance.image));
        Runtime& runtime = lease.runtime();
        graded = co_await evaluate(self, runtime, instance, p, dir, log, outcome);
      } catch (const InstanceError& e) {
        outcome.status = "error";
        outcome.error = first_line(e.what());
        log.info(e.what());
      } catch (const std::exception& e) {
        outcome.status = "error";
        outcome.error = first_line(e.what());
        log.error(
            fmt::format("Error in evaluating model for {}: {}", instance.instance_id, e.what()));
      }
      if (lease) {
        const auto t1 = Clock::now();
        try {
          co_await lease.release();
        } catch (const std::exception& e) {
          logging::warn("swebench: {}: stopping the sandbox: {}", instance.instance_id, e.what());
        }
        outcome.stop_seconds = seconds_since(t1);
      }
      if (self->stopping)
        co_return;  // cut short: nothing recorded, a rerun does it
      if (graded) {
        const json::object& entry = graded->at(instance.instance_id).as_object();
        log.info(fmt::format("report: {}\nResult for {}: resolved: {}", python_json(*graded),
                             instance.instance_id,
                             entry.at("resolved").as_bool() ? "True" : "False"));
      }
    }
    if (graded) {
      try {
        write_file_atomically(dir / log_report, python_json(*graded, 4));
        fill_verdict(*graded, instance, outcome);
      } catch (const std::exception& e) {
        outcome.status = "error";
        outcome.error = first_line(e.what());
      }
    }
    outcome.seconds = seconds_since(t0);
    try {
      const std::string line = json::serialize(outcome_json(outcome)) + "\n";
      std::ofstream out(self->outcomes_path(), std::ios::binary | std::ios::app);
      out << line;
    } catch (const std::exception& e) {
      logging::warn("swebench: {}: recording its times: {}", instance.instance_id, e.what());
    }
    self->report.outcomes.push_back(outcome);
    if (self->observer.finished)
      self->observer.finished(instance, outcome);
  }

  static void fill_verdict(const json::object& graded, const Instance& instance,
                           InstanceOutcome& outcome) {
    const json::object& entry = graded.at(instance.instance_id).as_object();
    outcome.status = entry.at("resolved").as_bool() ? "resolved" : "unresolved";
    const json::value* tests = entry.if_contains("tests_status");
    if (!tests) {
      outcome.verdict = "RESOLVED_NO";
      if (const json::value* why = entry.if_contains("infra_failure_reason"))
        outcome.error = fmt::format("no test results ({})", why->as_string().c_str());
      else
        outcome.error = "no test results in the output";
      return;
    }
    const auto& f2p = tests->at("FAIL_TO_PASS").as_object();
    const auto& p2p = tests->at("PASS_TO_PASS").as_object();
    outcome.f2p_passed = f2p.at("success").as_array().size();
    outcome.f2p_total = outcome.f2p_passed + f2p.at("failure").as_array().size();
    outcome.p2p_passed = p2p.at("success").as_array().size();
    outcome.p2p_total = outcome.p2p_passed + p2p.at("failure").as_array().size();
    const bool f2p_all = outcome.f2p_passed == outcome.f2p_total;
    const bool p2p_all = outcome.p2p_passed == outcome.p2p_total;
    if (f2p_all && p2p_all)
      outcome.verdict = "RESOLVED_FULL";
    else if (outcome.f2p_passed > 0 && !f2p_all && p2p_all)
      outcome.verdict = "RESOLVED_PARTIAL";
    else
      outcome.verdict = "RESOLVED_NO";
  }

  // make_run_report: the counts from the files on disk.
  static asio::awaitable<std::string> write_summary(std::shared_ptr<Impl> self) {
    std::set<std::string> completed, resolved, error, unresolved, incomplete, infra, ambiguous,
        empty;
    json::object reasons_unsorted;
    for (std::size_t i : self->full) {
      const std::string& id = self->dataset[i].instance_id;
      auto found = self->predictions.find(id);
      if (found == self->predictions.end()) {
        incomplete.insert(id);
        continue;
      }
      if (empty_patch(found->second)) {
        empty.insert(id);
        continue;
      }
      const fs::path report_file = self->log_dir(found->second) / log_report;
      if (!fs::exists(report_file)) {
        error.insert(id);
        continue;
      }
      completed.insert(id);
      try {
        const std::string text(py::strip(read_file(report_file)));
        if (text.empty()) {
          error.insert(id);
          continue;
        }
        const json::value report = json::parse(text);
        if (report.at(id).at("resolved").as_bool())
          resolved.insert(id);
        else
          unresolved.insert(id);
      } catch (const std::exception&) {
        error.insert(id);
      }
    }
    std::map<std::string, std::string> reasons;
    std::set<std::string> failing = unresolved;
    failing.insert(error.begin(), error.end());
    for (const std::string& id : failing) {
      const fs::path dir = self->log_dir(self->predictions.at(id));
      std::string text;
      bool any = false;
      for (std::string_view name : {log_test_output, log_instance}) {
        if (fs::exists(dir / name)) {
          text += (any ? "\n" : "") +
                  translate_newlines(decode_text(read_file(dir / name), "utf-8", "replace"));
          any = true;
        }
      }
      if (auto why = classify_failure(text)) {
        reasons[id] = why->first;
        (why->second == "environment" ? infra : ambiguous).insert(id);
      }
    }

    std::optional<std::set<std::string>> containers, images;
    if (auto* docker = self->config.deployment.get_if<DockerDeploymentConfig>();
        docker && !self->config.rewrite_reports) {
      try {
        docker::Engine engine(self->executor, engine_config_of(*docker));
        containers.emplace();
        images.emplace();
        const std::vector<docker::ContainerSummary> listed =
            co_await engine.list_containers(std::vector<std::string>{}, true);
        for (const auto& c : listed)
          for (const auto& name : c.names)
            if (name.find(self->config.run_id) != std::string::npos)
              containers->insert(name.substr(name.starts_with('/') ? 1 : 0));
        std::set<std::string> seen;
        for (std::size_t i : self->full) {
          const std::string& image = self->dataset[i].image;
          if (seen.insert(image).second && co_await engine.inspect_image(image))
            images->insert(image);
        }
      } catch (const std::exception& e) {
        logging::warn("swebench: listing the engine's containers and images: {}", e.what());
        containers.reset();
        images.reset();
      }
    }

    auto ids = [](const std::set<std::string>& s) {
      json::array out;
      for (const auto& id : s)
        out.emplace_back(id);
      return out;
    };
    std::set<std::string> submitted;
    for (const auto& [id, p] : self->predictions)
      submitted.insert(id);
    json::object s;
    s["total_instances"] = self->full.size();
    s["submitted_instances"] = self->predictions.size();
    s["completed_instances"] = completed.size();
    s["resolved_instances"] = resolved.size();
    s["unresolved_instances"] = unresolved.size();
    s["infra_failure_instances"] = infra.size();
    s["ambiguous_failure_instances"] = ambiguous.size();
    s["empty_patch_instances"] = empty.size();
    s["error_instances"] = error.size();
    s["completed_ids"] = ids(completed);
    s["incomplete_ids"] = ids(incomplete);
    s["empty_patch_ids"] = ids(empty);
    s["submitted_ids"] = ids(submitted);
    s["resolved_ids"] = ids(resolved);
    s["unresolved_ids"] = ids(unresolved);
    s["infra_failure_ids"] = ids(infra);
    s["ambiguous_failure_ids"] = ids(ambiguous);
    json::object reason_map;
    for (const auto& [id, reason] : reasons)
      reason_map[id] = reason;
    s["failure_reasons"] = std::move(reason_map);
    s["error_ids"] = ids(error);
    s["schema_version"] = 2;
    if (containers && images) {
      s["unstopped_instances"] = containers->size();
      s["unstopped_containers"] = ids(*containers);
      s["unremoved_images"] = ids(*images);
    }
    const fs::path dir = fs::path(self->config.report_dir);
    fs::create_directories(dir);
    const fs::path file = dir / fmt::format("{}.{}.json", self->model_dir, self->config.run_id);
    write_file_atomically(file, python_json(s, 4) + "\n");
    self->summary = std::move(s);
    self->summary_file = file.string();
    if (self->config.html)
      self->write_html(dir);
    co_return file.string();
  }

  // The last record of each instance in the outcomes file (times, what happened).
  std::map<std::string, json::object> recorded_outcomes() const {
    std::map<std::string, json::object> out;
    std::ifstream in(outcomes_path(), std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      json::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object())
        continue;  // a line cut by a kill
      const json::value* id = v.as_object().if_contains("instance_id");
      if (id && id->is_string())
        out[std::string(id->as_string())] = std::move(v.as_object());
    }
    return out;
  }

  // <report_dir>/<model>.<run_id>.html: the summary, each instance and its times, for a person.
  void write_html(const fs::path& report_dir) {
    std::map<std::string, std::string> status;
    for (const auto& [key, value] :
         {std::pair{"resolved_ids", "resolved"}, std::pair{"unresolved_ids", "unresolved"},
          std::pair{"error_ids", "error"}, std::pair{"empty_patch_ids", "empty_patch"},
          std::pair{"incomplete_ids", "incomplete"}})
      for (const auto& id : summary.at(key).as_array())
        status[std::string(id.as_string())] = value;
    const auto outcomes = recorded_outcomes();
    const fs::path html_dir = fs::absolute(report_dir);
    std::vector<ReportRow> rows;
    for (std::size_t i : full) {
      const Instance& instance = dataset[i];
      ReportRow row;
      row.instance_id = instance.instance_id;
      row.status = status.contains(row.instance_id) ? status[row.instance_id] : "incomplete";
      auto p = predictions.find(row.instance_id);
      if (p != predictions.end() && !empty_patch(p->second)) {
        const fs::path dir = fs::absolute(log_dir(p->second));
        if (fs::exists(dir / log_report)) {
          try {
            InstanceOutcome graded;
            fill_verdict(json::parse(read_file(dir / log_report)).as_object(), instance, graded);
            row.verdict = graded.verdict;
            row.f2p_passed = graded.f2p_passed;
            row.f2p_total = graded.f2p_total;
            row.p2p_passed = graded.p2p_passed;
            row.p2p_total = graded.p2p_total;
          } catch (const std::exception&) {
          }
        }
        if (fs::exists(dir / log_instance) &&
            (row.verdict.empty() || fs::exists(dir / log_test_output)))
          row.log_dir = fs::relative(dir, html_dir).generic_string();
        if (auto reason = summary.at("failure_reasons").as_object().if_contains(row.instance_id))
          row.reason = std::string(reason->as_string());
        else if (row.status == "error" || row.status == "unresolved")
          row.reason = describe_unresolved(config, p->second);
      }
      if (auto o = outcomes.find(row.instance_id); o != outcomes.end()) {
        const json::object& r = o->second;
        auto number = [](const json::value* v) -> std::optional<double> {
          return v && v->is_number() ? std::optional(v->to_number<double>()) : std::nullopt;
        };
        row.seconds = number(r.if_contains("seconds"));
        if (const auto* phases = r.if_contains("phases"); phases && phases->is_object()) {
          row.start_seconds = number(phases->as_object().if_contains("start"));
          row.patch_seconds = number(phases->as_object().if_contains("patch"));
          row.eval_seconds = number(phases->as_object().if_contains("eval"));
          row.stop_seconds = number(phases->as_object().if_contains("stop"));
        }
      }
      rows.push_back(std::move(row));
    }
    ReportMeta meta;
    meta.run_id = config.run_id;
    meta.model = model_dir;
    meta.dataset = config.dataset_name;
    meta.deployment = config.rewrite_reports ? std::string("(graded again, nothing run)")
                                             : deployment_name(config.deployment);
    meta.generated_at = utc_now_iso();
    meta.wall_seconds = report.wall_seconds;
    meta.max_workers = config.max_workers;
    const fs::path file = report_dir / fmt::format("{}.{}.html", model_dir, config.run_id);
    write_file_atomically(file, render_html_report(summary, rows, meta));
    html_file = file.string();
  }

  fs::path run_dir() const {
    return fs::path(config.root) / run_evaluation_log_dir / config.run_id;
  }

  // rex's own record of each finished instance of the run (times, what happened), for the HTML
  // report; the harness's files stay as the harness writes them.
  fs::path outcomes_path() const { return run_dir() / fmt::format("rex.{}.jsonl", model_dir); }

  // run.json: what the run graded against, as the harness records it.
  void write_run_metadata() const {
    const fs::path path = run_dir() / "run.json";
    fs::create_directories(path.parent_path());
    json::value task_repo = nullptr;
    if (fs::exists(path)) {
      try {
        if (const auto* old = json::parse(read_file(path)).as_object().if_contains("task_repo"))
          task_repo = *old;
      } catch (const std::exception&) {
      }
    }
    json::object meta;
    meta["dataset"] = config.dataset_name;
    meta["split"] = config.split;
    meta["task_repo"] = task_repo;
    meta["created_at"] = utc_now_iso();
    write_file_atomically(path, python_json(meta, 2) + "\n");
  }

  // The gateway's environments by image (the first by name when several have one).
  static asio::awaitable<std::map<std::string, std::string>> gateway_environments(
      std::shared_ptr<Impl> self, const GatewayDeploymentConfig& gateway) {
    http::Client client(self->executor, gateway.url);
    http::ClientRequest request;
    request.method = "GET";
    request.target = "/api/environments";
    if (!gateway.token.empty())
      request.headers.emplace_back("Authorization", "Bearer " + gateway.token);
    const http::ClientResponse answer = co_await client.request(std::move(request));
    if (answer.status != 200)
      throw std::runtime_error(
          fmt::format("the gateway at {} answered GET /api/environments "
                      "with HTTP {}: {}",
                      gateway.url, answer.status, answer.body.substr(0, 300)));
    std::map<std::string, std::string> by_image;
    const json::value listed = json::parse(answer.body);
    const json::value* list =
        listed.is_object() ? listed.as_object().if_contains("environments") : &listed;
    if (!list || !list->is_array())
      throw std::runtime_error("the gateway's GET /api/environments is not a list");
    std::map<std::string, std::string> sorted;  // name -> image
    for (const auto& e : list->as_array()) {
      const json::object* o = e.if_object();
      const json::value* name = o ? o->if_contains("name") : nullptr;
      const json::value* image = o ? o->if_contains("image") : nullptr;
      if (name && name->is_string() && image && image->is_string())
        sorted.emplace(std::string(name->as_string()), std::string(image->as_string()));
    }
    for (const auto& [name, image] : sorted)
      by_image.emplace(image, name);
    co_return by_image;
  }

  static asio::awaitable<void> check_images(std::shared_ptr<Impl> self) {
    if (const auto* gateway = self->config.deployment.get_if<GatewayDeploymentConfig>();
        gateway && !self->config.rewrite_reports && self->pools.empty()) {
      const auto environments = co_await gateway_environments(self, *gateway);
      std::vector<std::string> problems;
      self->plan_pools(problems, environments);
      if (!problems.empty())
        throw InputError(std::move(problems));
      co_return;
    }
    const auto* docker = self->config.deployment.get_if<DockerDeploymentConfig>();
    if (!docker || self->config.rewrite_reports || docker->pull == PullPolicy::always)
      co_return;
    docker::Engine engine(self->executor, engine_config_of(*docker));
    std::vector<std::string> problems;
    std::map<std::string, bool> checked;
    for (const Plan& plan : self->plans) {
      const Instance& instance = self->dataset[plan.instance];
      auto found = checked.find(instance.image);
      if (found == checked.end()) {
        bool present = static_cast<bool>(co_await engine.inspect_image(instance.image));
        std::string why = "not on the engine, and the pull policy is never";
        if (!present && docker->pull != PullPolicy::never) {
          try {
            co_await engine.pull_image(instance.image, docker->platform.value_or(""), {});
            present = true;
          } catch (const std::exception& e) {
            why = fmt::format("not on the engine, and pulling it failed: {}", first_line(e.what()));
          }
        }
        found = checked.emplace(instance.image, present).first;
        if (!present)
          problems.push_back(fmt::format("{}: image: {}: {}", instance.where, instance.image, why));
      } else if (!found->second) {
        problems.push_back(
            fmt::format("{}: image: {}: missing (as above)", instance.where, instance.image));
      }
    }
    if (!problems.empty())
      throw InputError(std::move(problems));
  }

  static asio::awaitable<HarnessReport> run(std::shared_ptr<Impl> self, HarnessObserver observer) {
    if (self->ran)
      throw std::logic_error("Harness::run: called twice");
    self->ran = true;
    self->observer = std::move(observer);
    const auto t0 = Clock::now();
    if (!self->config.rewrite_reports &&
        std::any_of(self->plans.begin(), self->plans.end(), [](const Plan& p) { return !p.pool; }))
      throw std::logic_error(
          "Harness::run: the gateway's environments were not looked up "
          "(call check_images() first)");
    self->write_run_metadata();
    std::vector<std::size_t> items(self->plans.size());
    for (std::size_t i = 0; i < items.size(); ++i)
      items[i] = i;
    auto job = [self](std::size_t& index) { return run_one(self, index); };
    if (!items.empty())
      co_await fan_out(std::move(items), self->config.max_workers, std::move(job));
    for (auto& [image, pool] : self->pools)
      co_await pool->shutdown();
    self->report.stopped = self->stopping;
    self->report.wall_seconds = seconds_since(t0);
    co_await write_summary(self);
    co_return std::move(self->report);
  }
};

Harness::Harness(asio::any_io_executor executor, HarnessConfig config,
                 std::vector<Instance> dataset, std::vector<Prediction> predictions,
                 std::vector<std::string> instance_ids)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config), std::move(dataset),
                                   std::move(predictions), std::move(instance_ids))) {}

Harness::~Harness() = default;

asio::awaitable<void> Harness::check_images() {
  return Impl::check_images(impl_);
}

std::size_t Harness::to_run() const noexcept {
  return impl_->plans.size();
}
std::size_t Harness::completed() const noexcept {
  return impl_->completed;
}
std::size_t Harness::empty_patches() const noexcept {
  return impl_->empty;
}
const std::string& Harness::model() const noexcept {
  return impl_->model_dir;
}

asio::awaitable<HarnessReport> Harness::run(HarnessObserver observer) {
  return Impl::run(impl_, std::move(observer));
}

void Harness::stop() {
  impl_->stop();
}

asio::awaitable<std::string> Harness::write_summary() {
  return Impl::write_summary(impl_);
}

const json::object& Harness::summary() const noexcept {
  return impl_->summary;
}

const std::string& Harness::summary_path() const noexcept {
  return impl_->summary_file;
}

const std::string& Harness::html_path() const noexcept {
  return impl_->html_file;
}

}  // namespace rex::swebench
