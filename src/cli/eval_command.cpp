#include "eval_command.hpp"

#include <rex/core/log.hpp>
#include <rex/eval/eval_summary.hpp>
#include <rex/eval/evaluation.hpp>
#include <rex/eval/results_log.hpp>

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "progress.hpp"
#include "stop_signals.hpp"

namespace rex::cli {

namespace {

using Clock = std::chrono::steady_clock;

double total_seconds(const EvalResult& r) {
  return r.times.start.value_or(0) + r.times.setup.value_or(0) + r.times.run.value_or(0) +
         r.times.teardown.value_or(0);
}

// One word or two for a finished instance: "passed", "failed (exit 1)", "error (setup: ...)".
std::string outcome(const EvalResult& r) {
  switch (r.status) {
    case EvalStatus::passed:
      return "passed";
    case EvalStatus::failed:
      return fmt::format("failed (exit {})", r.exit_code.value_or(-1));
    case EvalStatus::timeout:
      return "timeout";
    case EvalStatus::error:
      break;
  }
  std::string message = r.error ? r.error->message : std::string();
  if (const auto newline = message.find('\n'); newline != std::string::npos)
    message = message.substr(0, newline) + " ...";
  if (message.size() > 160)
    message = message.substr(0, 160) + " ...";
  return r.error ? fmt::format("error ({}: {})", r.error->phase, message) : "error";
}

struct Session {
  Evaluation& evaluation;
  StopSignals& signals;
  Progress& progress;
  bool done = false;
};

// The first stop signal stops the evaluation; close() of the signals ends this quietly.
asio::awaitable<void> watch_signals(Session& s) {
  const int signo = co_await s.signals.wait();
  if (signo == 0)
    co_return;
  s.progress.line(fmt::format(
      "rex eval: {}: stopping {} running instance{} (again to exit at once); unfinished "
      "instances get no result and run on the next try",
      signal_name(signo), s.evaluation.running(), s.evaluation.running() == 1 ? "" : "s"));
  s.evaluation.stop();
}

asio::awaitable<EvaluationReport> drive(Session& s) {
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, watch_signals(s), asio::detached);
  if (s.progress.live())
    asio::co_spawn(executor, redraw_until(s.progress, s.done), asio::detached);
  EvaluationObserver observer;
  observer.started = [&s](const EvalInstance&) { s.progress.started(); };
  observer.finished = [&s](const EvalInstance&, const EvalResult& r) {
    s.progress.finished(
        r.status == EvalStatus::passed,
        fmt::format("{} {} {}", r.id, outcome(r), format_duration(total_seconds(r))));
  };
  s.progress.draw();
  EvaluationReport report;
  std::exception_ptr failure;
  try {
    auto running = s.evaluation.run(std::move(observer));
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

std::string phase_row(std::string_view name, const EvalPhaseStats& stats) {
  if (stats.count == 0)
    return fmt::format("  {:<10}{:>9}{:>9}{:>9}\n", name, "-", "-", "-");
  return fmt::format("  {:<10}{:>9}{:>9}{:>9}\n", name, format_duration(stats.p50),
                     format_duration(stats.p95), format_duration(stats.max));
}

void print_summary(const Evaluation& evaluation, const EvaluationReport& report,
                   std::size_t parallel) {
  const EvalSummary run = summarize(report.results);
  const EvalSummary all = summarize(evaluation.recorded());
  const double rate =
      report.wall_seconds > 0 ? static_cast<double>(run.total) / report.wall_seconds : 0;
  std::string text =
      fmt::format("{} instance{} finished in {} ({:.1f}/s, parallel {})", run.total,
                  run.total == 1 ? "" : "s", format_duration(report.wall_seconds), rate, parallel);
  if (report.unfinished > 0)
    text += fmt::format(", {} unfinished", report.unfinished);
  text += "\n";
  text += fmt::format("  {:<10}{:>9}{:>9}\n", "status", "this run", "all");
  for (auto status :
       {EvalStatus::passed, EvalStatus::failed, EvalStatus::timeout, EvalStatus::error}) {
    text += fmt::format("  {:<10}{:>9}{:>9}\n", to_string(status), run.count(status),
                        all.count(status));
  }
  text += fmt::format("  {:<10}{:>9}{:>9}\n", "total", run.total, all.total);
  text += fmt::format("  {:<10}{:>9}{:>9}{:>9}\n", "phase", "p50", "p95", "max");
  text += phase_row("start", run.start);
  text += phase_row("setup", run.setup);
  text += phase_row("run", run.run);
  text += phase_row("teardown", run.teardown);
  text += fmt::format("results: {} ({} of {} instances)\n", evaluation.results_path(), all.total,
                      evaluation.total());
  std::cout << text;
  std::cout.flush();
}

// Library warnings go to stderr (stdout carries the summary); the records hold every failure,
// so only errors are shown.
void quiet_library_logging() {
  logging::set_level(logging::Level::error);
  logging::use_plain_stderr("rex eval: ");
}

void print_problems(const EvalInstanceError& e) {
  for (const auto& problem : e.problems())
    std::cerr << "rex eval: " << problem << '\n';
}

}  // namespace

void add_eval_options(CLI::App& app, EvalOptions& o) {
  app.add_option("instances", o.instances_file,
                 "A JSON-lines file: one instance per line (id, run, setup, upload, artifacts, "
                 "timeout, image or deployment)")
      ->required();
  app.add_option("-o,--output", o.output_dir,
                 "The directory for results.jsonl, artifacts/ and (local) work/; a rerun with the "
                 "same directory skips the instances already done")
      ->required();
  app.add_option("-j,--parallel", o.parallel, "Instances (sandboxes) at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--timeout", o.timeout, "Seconds for an instance's run when it sets no timeout")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--setup-timeout", o.setup_timeout, "Seconds for each setup command")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--retry-errors", o.retry_errors,
               "Run again the instances whose result is an error (their old record is removed)");
  app.add_flag("--keep-work", o.keep_work,
               "local: keep each instance's working directory (DIR/work/<id>, or under --workdir)");
  add_deployment_options(app, o.deployment);
}

int eval_command(const EvalOptions& options) {
  quiet_library_logging();
  EvaluationConfig config;
  std::vector<EvalInstance> instances;
  try {
    config.deployment = build_deployment_config(options.deployment);
    instances = load_eval_instances(options.instances_file);
  } catch (const EvalInstanceError& e) {
    print_problems(e);
    return exit_usage;
  } catch (const DeploymentConfigError& e) {
    std::cerr << "rex eval: " << e.what() << '\n';
    return exit_usage;
  }
  config.output_dir = options.output_dir;
  config.parallel = options.parallel;
  config.timeout = options.timeout;
  config.setup_timeout = options.setup_timeout;
  config.retry_errors = options.retry_errors;
  config.keep_work = options.keep_work;

  asio::io_context io(1);
  std::unique_ptr<Evaluation> evaluation;  // after io: destroyed while io still exists
  try {
    evaluation = std::make_unique<Evaluation>(io.get_executor(), config, std::move(instances));
  } catch (const EvalInstanceError& e) {
    print_problems(e);
    return exit_usage;
  } catch (const ResultsLogError& e) {
    std::cerr << "rex eval: " << e.what() << '\n';
    return exit_usage;
  }
  if (evaluation->repaired_bytes() > 0)
    std::cerr << fmt::format(
        "rex eval: {}: dropped a torn last line ({} bytes) left by an interrupted write\n",
        evaluation->results_path(), evaluation->repaired_bytes());
  if (evaluation->retried() > 0)
    std::cerr << fmt::format("rex eval: running {} instance{} again whose result was an error\n",
                             evaluation->retried(), evaluation->retried() == 1 ? "" : "s");
  if (evaluation->skipped() > 0)
    std::cerr << fmt::format("rex eval: skipping {} instance{} already done ({})\n",
                             evaluation->skipped(), evaluation->skipped() == 1 ? "" : "s",
                             evaluation->results_path());
  if (!options.deployment.quiet)
    std::cerr << fmt::format("rex eval: {} instance{} to run on {}, {} at once\n",
                             evaluation->pending(), evaluation->pending() == 1 ? "" : "s",
                             describe_deployment(config.deployment), options.parallel);

  StopSignals signals(io);
  Progress progress(
      evaluation->pending(), [&evaluation] { return evaluation->running(); },
      options.deployment.quiet);
  Session session{*evaluation, signals, progress};
  std::optional<EvaluationReport> report;
  std::exception_ptr failure;
  asio::co_spawn(io, drive(session), [&](std::exception_ptr e, EvaluationReport r) {
    failure = e;
    if (!e)
      report = std::move(r);
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "rex eval: " << e.what() << '\n';
    }
    return exit_failure;
  }
  if (!report)  // a second signal stopped the io_context
    return 128 + signals.signal();
  print_summary(*evaluation, *report, options.parallel);
  if (signals.signal() != 0)
    return 128 + signals.signal();
  const auto recorded = evaluation->recorded();
  for (const auto& r : recorded) {
    if (r.status == EvalStatus::error)
      return exit_failure;
  }
  return recorded.size() == evaluation->total() ? 0 : exit_failure;
}

}  // namespace rex::cli
