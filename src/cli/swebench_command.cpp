#include "swebench_command.hpp"

#include <rex/core/log.hpp>
#include <rex/swebench/grading.hpp>
#include <rex/swebench/harness.hpp>
#include <rex/swebench/repeats.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

#include "progress.hpp"
#include "stop_signals.hpp"

namespace rex::cli {

namespace {

using swebench::Harness;
using swebench::InstanceOutcome;

// Python's str2bool, as the harness reads its boolean flags.
std::optional<bool> str2bool(std::string value) {
  for (auto& c : value)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "yes" || value == "true" || value == "t" || value == "y" || value == "1")
    return true;
  if (value == "no" || value == "false" || value == "f" || value == "n" || value == "0")
    return false;
  return std::nullopt;
}

std::string describe(const InstanceOutcome& o) {
  std::string what;
  if (o.status == "error") {
    std::string message = o.error;
    if (message.size() > 160)
      message = message.substr(0, 160) + " ...";
    what = fmt::format("error ({})", message);
  } else if (o.f2p_total + o.p2p_total > 0 || !o.verdict.empty()) {
    what = fmt::format("{} {} (F2P {}/{}, P2P {}/{})", o.status, o.verdict, o.f2p_passed,
                       o.f2p_total, o.p2p_passed, o.p2p_total);
    if (o.f2p_total + o.p2p_total == 0 && !o.error.empty())
      what = fmt::format("{} {} ({})", o.status, o.verdict, o.error);
  } else {
    what = o.status;
  }
  return fmt::format("{} {} {}", o.instance_id, what, format_duration(o.seconds));
}

struct Session {
  Harness& harness;
  StopSignals& signals;
  Progress& progress;
  std::size_t running = 0;
  bool done = false;
};

asio::awaitable<void> watch_signals(Session& s) {
  const int signo = co_await s.signals.wait();
  if (signo == 0)
    co_return;
  s.progress.line(fmt::format(
      "rex swebench: {}: stopping {} running instance{} (again to exit at once); unfinished "
      "instances get no report and run on the next try",
      signal_name(signo), s.running, s.running == 1 ? "" : "s"));
  s.harness.stop();
}

asio::awaitable<swebench::HarnessReport> drive(Session& s) {
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, watch_signals(s), asio::detached);
  if (s.progress.live())
    asio::co_spawn(executor, redraw_until(s.progress, s.done), asio::detached);
  swebench::HarnessObserver observer;
  observer.started = [&s](const swebench::Instance&) {
    ++s.running;
    s.progress.started();
  };
  observer.finished = [&s](const swebench::Instance&, const InstanceOutcome& o) {
    --s.running;
    s.progress.finished(o.status == "resolved", describe(o));
  };
  s.progress.draw();
  swebench::HarnessReport report;
  std::exception_ptr failure;
  try {
    auto running = s.harness.run(std::move(observer));
    report = co_await std::move(running);
  } catch (...) {
    failure = std::current_exception();
  }
  s.done = true;
  s.signals.close();
  s.progress.end();
  if (failure)
    std::rethrow_exception(failure);
  co_return report;
}

// The harness's closing lines, from the summary it wrote.
void print_summary(const boost::json::object& s, const std::string& path) {
  auto count = [&s](const char* key) {
    const auto* v = s.if_contains(key);
    return v ? v->to_number<std::int64_t>() : 0;
  };
  std::string text;
  text += fmt::format("Total instances: {}\n", count("total_instances"));
  text += fmt::format("Instances submitted: {}\n", count("submitted_instances"));
  text += fmt::format("Instances completed: {}\n", count("completed_instances"));
  text += fmt::format("Instances incomplete: {}\n", s.at("incomplete_ids").as_array().size());
  text += fmt::format("Instances resolved: {}\n", count("resolved_instances"));
  text += fmt::format("Instances unresolved: {}\n", count("unresolved_instances"));
  text += fmt::format("Instances with likely infrastructure failures: {}\n",
                      count("infra_failure_instances"));
  text +=
      fmt::format("Instances with ambiguous failures: {}\n", count("ambiguous_failure_instances"));
  text += fmt::format("Instances with empty patches: {}\n", count("empty_patch_instances"));
  text += fmt::format("Instances with errors: {}\n", count("error_instances"));
  if (s.contains("unstopped_containers")) {
    text += fmt::format("Unstopped containers: {}\n", count("unstopped_instances"));
    text += fmt::format("Unremoved images: {}\n", s.at("unremoved_images").as_array().size());
  }
  text += fmt::format("Report written to {}\n", path);
  std::cout << text;
  std::cout.flush();
}

void print_problems(const swebench::InputError& e) {
  for (const auto& problem : e.problems())
    std::cerr << "rex swebench: " << problem << '\n';
}

// The harness sets the open-file limit to --open_file_limit; rex raises its soft limit that far
// (never past the hard one, which only root could raise).
void apply_open_file_limit(long wanted) {
  rlimit limit{};
  if (wanted <= 0 || ::getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return;
  const auto target = static_cast<rlim_t>(wanted);
  if (limit.rlim_cur >= target)
    return;
  limit.rlim_cur = std::min(target, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// A gold run checks the dataset: every instance should resolve with its own patch.
void print_gold_check(const swebench::HarnessConfig& config,
                      const std::vector<swebench::Instance>& dataset,
                      const std::vector<swebench::Prediction>& predictions,
                      const std::map<std::string, swebench::InstanceRepeats>& repeats) {
  std::vector<std::string> lines;
  for (const auto& p : predictions) {
    auto found = repeats.find(p.instance_id);
    if (found == repeats.end())
      continue;
    const auto& outcomes = found->second.outcomes;
    if (std::all_of(outcomes.begin(), outcomes.end(),
                    [](const std::string& o) { return o == "resolved"; }))
      continue;
    const auto* instance = &*std::find_if(dataset.begin(), dataset.end(), [&](const auto& i) {
      return i.instance_id == p.instance_id;
    });
    lines.push_back(fmt::format("  {} ({}): {}", p.instance_id, instance->where,
                                swebench::describe_unresolved(config, p)));
  }
  if (lines.empty()) {
    std::cout << fmt::format("Dataset check: all {} gold patches resolve their instances\n",
                             repeats.size());
    return;
  }
  std::cout << fmt::format(
      "Dataset check: {} of {} instances do not resolve with their gold "
      "patch:\n",
      lines.size(), repeats.size());
  for (const auto& line : lines)
    std::cout << line << '\n';
}

// The flaky tests and verdicts over the repeats, written beside the summaries.
int print_repeats(const SwebenchOptions& options, const std::vector<std::string>& run_ids,
                  const std::map<std::string, swebench::InstanceRepeats>& repeats) {
  std::size_t flaky_tests = 0, flaky_verdicts = 0;
  std::string text;
  for (const auto& [id, r] : repeats) {
    if (r.flaky_tests.empty() && !r.flaky_verdict)
      continue;
    std::string outcomes;
    for (const auto& o : r.outcomes)
      outcomes += (outcomes.empty() ? "" : ", ") + o;
    text += fmt::format("  {}: {}{}\n", id, outcomes, r.flaky_verdict ? " (flaky verdict)" : "");
    for (const auto& t : r.flaky_tests)
      text += fmt::format("    flaky test: {}\n", t);
    flaky_tests += r.flaky_tests.size();
    flaky_verdicts += r.flaky_verdict ? 1 : 0;
  }
  const std::string path = fmt::format("{}/{}.flaky.json", options.report_dir, options.run_id);
  try {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << swebench::python_json(swebench::repeats_json(run_ids, repeats), 4) << '\n';
    if (!out)
      throw std::runtime_error("cannot write " + path);
  } catch (const std::exception& e) {
    std::cerr << "rex swebench: " << e.what() << '\n';
    return exit_failure;
  }
  std::cout << fmt::format("Repeats: {} runs; {} flaky test{}, {} flaky verdict{}\n",
                           run_ids.size(), flaky_tests, flaky_tests == 1 ? "" : "s", flaky_verdicts,
                           flaky_verdicts == 1 ? "" : "s")
            << text << fmt::format("Flakiness written to {}\n", path);
  return 0;
}

// One whole run of the harness: its progress, its summary. Returns the exit status.
int run_once(const swebench::HarnessConfig& config, const std::vector<swebench::Instance>& dataset,
             const std::vector<swebench::Prediction>& predictions, const SwebenchOptions& options) {
  const bool rewrite = config.rewrite_reports;
  asio::io_context io(1);
  std::unique_ptr<Harness> harness;
  try {
    harness = std::make_unique<Harness>(io.get_executor(), config, dataset, predictions,
                                        options.instance_ids);
    std::exception_ptr failure;
    asio::co_spawn(io, harness->check_images(), [&](std::exception_ptr e) { failure = e; });
    io.run();
    io.restart();
    if (failure)
      std::rethrow_exception(failure);
  } catch (const swebench::InputError& e) {
    print_problems(e);
    return exit_usage;
  } catch (const std::exception& e) {
    std::cerr << "rex swebench: checking the images: " << e.what() << '\n';
    return exit_failure;
  }
  if (harness->completed() > 0)
    std::cerr << fmt::format("rex swebench: {} instance{} already run, skipping\n",
                             harness->completed(), harness->completed() == 1 ? "" : "s");
  if (harness->empty_patches() > 0)
    std::cerr << fmt::format("rex swebench: {} empty patch{}, not run\n", harness->empty_patches(),
                             harness->empty_patches() == 1 ? "" : "es");
  if (!options.deployment.quiet)
    std::cerr << fmt::format("rex swebench: {} instance{} to {} on {}, {} at once\n",
                             harness->to_run(), harness->to_run() == 1 ? "" : "s",
                             rewrite ? "grade again" : "run",
                             rewrite ? std::string("the logs already there")
                                     : swebench::deployment_name(config.deployment),
                             options.max_workers);

  StopSignals signals(io);
  Session* session_ptr = nullptr;
  Progress progress(
      harness->to_run(), [&session_ptr] { return session_ptr ? session_ptr->running : 0; },
      options.deployment.quiet, "unresolved");
  Session session{*harness, signals, progress};
  session_ptr = &session;
  std::optional<swebench::HarnessReport> report;
  std::exception_ptr failure;
  asio::co_spawn(io, drive(session), [&](std::exception_ptr e, swebench::HarnessReport r) {
    failure = e;
    if (!e)
      report = std::move(r);
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "rex swebench: " << e.what() << '\n';
    }
    return exit_failure;
  }
  if (!report)
    return 128 + signals.signal();
  print_summary(harness->summary(), harness->summary_path());
  if (!harness->html_path().empty())
    std::cout << "HTML report: " << harness->html_path() << '\n';
  if (signals.signal() != 0)
    return 128 + signals.signal();
  return harness->summary().at("error_ids").as_array().empty() ? 0 : exit_failure;
}

}  // namespace

void rewrite_swebench_arguments(int argc, char** argv) {
  static char run_id_flag[] = "--run_id";
  bool in_swebench = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "swebench") == 0)
      in_swebench = true;
    else if (in_swebench && std::strcmp(argv[i], "-id") == 0)
      argv[i] = run_id_flag;
  }
}

void add_swebench_options(CLI::App& app, SwebenchOptions& o) {
  app.add_option("-d,--dataset_name,--dataset-name", o.dataset_name,
                 "The dataset: a local .json or .jsonl file of SWE-bench 5.x instances")
      ->required();
  app.add_option("-s,--split", o.split, "The dataset's split (a local file is one split)")
      ->capture_default_str();
  app.add_option("-i,--instance_ids,--instance-ids", o.instance_ids,
                 "Only these instances (space separated)");
  app.add_option("-p,--predictions_path,--predictions-path", o.predictions_path,
                 "Predictions (.json or .jsonl of {instance_id, model_name_or_path, "
                 "model_patch}), or \"gold\" for the dataset's own patches")
      ->required();
  app.add_option("--max_workers,--max-workers", o.max_workers, "Instances (sandboxes) at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--open_file_limit,--open-file-limit", o.open_file_limit, "Open file limit")
      ->capture_default_str();
  app.add_option("-t,--timeout", o.timeout, "Seconds for each instance's tests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--run_id,--run-id", o.run_id, "The run's id (also -id)")->required();
  app.add_option("--rewrite_reports,--rewrite-reports", o.rewrite_reports,
                 "true: grade the test outputs already there again, running nothing")
      ->capture_default_str();
  app.add_option("--report_dir,--report-dir", o.report_dir, "Where the summary is written")
      ->capture_default_str();
  app.add_option("--repeat", o.repeat,
                 "Run every instance this many times (run ids RUN_ID, RUN_ID.2, ...) and report "
                 "the tests and verdicts that differ between runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--modal", o.modal, "Refused: use --deployment modal")->capture_default_str();
  o.deployment.deployment = "docker";
  add_deployment_options(app, o.deployment);
}

int swebench_command(const SwebenchOptions& options) {
  logging::set_level(logging::Level::error);
  logging::use_plain_stderr("rex swebench: ");
  const auto rewrite = str2bool(options.rewrite_reports);
  const auto modal = str2bool(options.modal);
  if (!rewrite || !modal) {
    std::cerr << "rex swebench: --rewrite_reports and --modal take a boolean (true/false, "
                 "yes/no, 1/0)\n";
    return exit_usage;
  }
  if (*modal) {
    std::cerr << "rex swebench: --modal true: Modal is one of rex's deployments; use "
                 "--deployment modal (docs/modal.md)\n";
    return exit_usage;
  }
  swebench::HarnessConfig config;
  std::vector<swebench::Instance> dataset;
  std::vector<swebench::Prediction> predictions;
  try {
    config.deployment = build_deployment_config(options.deployment);
    dataset = swebench::load_dataset(options.dataset_name, options.split);
    predictions = options.predictions_path == "gold"
                      ? swebench::gold_predictions(dataset)
                      : swebench::load_predictions(options.predictions_path);
  } catch (const swebench::InputError& e) {
    print_problems(e);
    return exit_usage;
  } catch (const DeploymentConfigError& e) {
    std::cerr << "rex swebench: " << e.what() << '\n';
    return exit_usage;
  }
  if (options.predictions_path == "gold" && !options.instance_ids.empty()) {
    // The harness makes gold predictions for the selected instances only.
    std::erase_if(predictions, [&](const swebench::Prediction& p) {
      return std::find(options.instance_ids.begin(), options.instance_ids.end(), p.instance_id) ==
             options.instance_ids.end();
    });
  }
  config.run_id = options.run_id;
  config.dataset_name = options.dataset_name;
  config.split = options.split;
  config.timeout = options.timeout;
  config.max_workers = options.max_workers;
  config.report_dir = options.report_dir;
  config.rewrite_reports = *rewrite;
  apply_open_file_limit(options.open_file_limit);

  std::vector<std::string> run_ids;
  int status = 0;
  for (std::size_t k = 1; k <= options.repeat; ++k) {
    config.run_id = swebench::repeat_run_id(options.run_id, k);
    if (options.repeat > 1)
      std::cerr << fmt::format("rex swebench: run {} of {} (run id {})\n", k, options.repeat,
                               config.run_id);
    run_ids.push_back(config.run_id);
    status = run_once(config, dataset, predictions, options);
    if (status == exit_usage || status >= 128)
      return status;
  }
  const auto repeats = swebench::compare_repeats(".", run_ids, predictions);
  if (options.predictions_path == "gold")
    print_gold_check(config, dataset, predictions, repeats);
  if (options.repeat > 1)
    status = std::max(status, print_repeats(options, run_ids, repeats));
  return status;
}

}  // namespace rex::cli
