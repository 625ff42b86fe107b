#include "run_command.hpp"

#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <fstream>
#include <iostream>

namespace rex::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<Action> demo_actions() {
  auto bash = [](std::string command) {
    BashAction a;
    a.command = std::move(command);
    a.timeout = 30.0;
    a.check = "silent";
    return a;
  };
  auto interactive = [&](std::string command, std::string expect) {
    BashAction a = bash(std::move(command));
    a.is_interactive_command = true;
    a.expect = {std::move(expect)};
    return a;
  };
  BashAction quit = bash("exit()");
  quit.is_interactive_quit = true;
  return {
      bash("cd /tmp && export GREETING='hello from rex'"),
      bash("echo \"$GREETING in $PWD\""),
      bash("for i in 1 2 3; do\n  echo \"line $i\"\ndone"),
      bash("ls /nonexistent-path"),
      interactive("python3 -q", ">>> "),
      interactive("print(sum(range(10)))", ">>> "),
      quit,
      bash("echo back in bash, last status $?"),
  };
}

std::vector<Action> load_actions(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DeploymentConfigError("cannot open actions file '" + path + "'");
  std::vector<Action> actions;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    try {
      actions.push_back(parse_json<Action>(line));
    } catch (const ProtocolError& e) {
      throw DeploymentConfigError(fmt::format("{}:{}: {}", path, number, e.what()));
    }
  }
  return actions;
}

void print_step(const Action& action, const BashObservation* obs, const std::string* error,
                double ms, bool json) {
  if (json) {
    boost::json::object line{{"action", to_json(action)}, {"elapsed_ms", ms}};
    if (obs)
      line["observation"] = to_json(*obs);
    if (error)
      line["error"] = *error;
    std::cout << boost::json::serialize(line) << '\n';
    std::cout.flush();
    return;
  }
  if (const auto* bash = std::get_if<BashAction>(&action)) {
    std::cout << (bash->is_interactive_command || bash->is_interactive_quit ? "> " : "$ ")
              << bash->command << '\n';
  } else {
    std::cout << "^C\n";
  }
  if (obs) {
    std::cout << obs->output;
    if (!obs->output.empty() && obs->output.back() != '\n')
      std::cout << '\n';
    std::cout << fmt::format("[exit {}, {:.2f} ms]\n",
                             obs->exit_code ? std::to_string(*obs->exit_code) : "none", ms);
  }
  if (error)
    std::cout << fmt::format("[error: {}, {:.2f} ms]\n", *error, ms);
  std::cout.flush();
}

asio::awaitable<int> run_actions(Deployment& deployment, const RunOptions& options,
                                 const std::vector<Action>& actions) {
  Runtime& runtime = deployment.runtime();
  int failures = 0;
  CreateBashSessionRequest create;
  create.startup_source = options.startup_source;
  create.startup_timeout = 10.0;
  auto created = co_await runtime.create_session(create);
  if (!created.output.empty() && !options.json)
    std::cout << created.output;
  for (const auto& action : actions) {
    const auto t0 = Clock::now();
    try {
      auto obs = co_await runtime.run_in_session(action);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      print_step(action, &obs, nullptr, ms, options.json);
    } catch (const SwerexException& e) {
      ++failures;
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::string error = fmt::format("{}: {}", e.class_path(), e.what());
      print_step(action, nullptr, &error, ms, options.json);
    }
  }
  CloseBashSessionRequest close;
  co_await runtime.close_session(close);
  co_return failures == 0 ? 0 : exit_failure;
}

}  // namespace

void add_run_options(CLI::App& app, RunOptions& run) {
  app.add_option("commands", run.commands, "Commands to run, one observation each");
  app.add_flag("--demo", run.demo,
               "Run a short built-in demonstration (shell state, exit codes, python3)");
  app.add_option("--actions", run.actions_file,
                 "A JSON-lines file of actions (bash or bash_interrupt)");
  app.add_option("--timeout", run.timeout, "Timeout per command in seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--startup-source", run.startup_source, "Files to source when the session starts")
      ->allow_extra_args(false);
  app.add_flag("--json", run.json, "Print one JSON object per step");
  add_deployment_options(app, run.deployment);
}

int run_command(const RunOptions& options) {
  std::vector<Action> actions;
  asio::io_context io(1);
  std::unique_ptr<Deployment> deployment;  // after io: destroyed while io still exists
  try {
    if (options.demo)
      actions = demo_actions();
    if (!options.actions_file.empty()) {
      auto more = load_actions(options.actions_file);
      actions.insert(actions.end(), more.begin(), more.end());
    }
    for (const auto& c : options.commands) {
      BashAction a;
      a.command = c;
      a.timeout = options.timeout;
      a.check = "silent";
      actions.emplace_back(std::move(a));
    }
    if (actions.empty())
      throw DeploymentConfigError("nothing to run (give commands, --actions FILE or --demo)");
    deployment = make_deployment(io.get_executor(), build_deployment_config(options.deployment));
  } catch (const DeploymentConfigError& e) {
    std::cerr << "rex run: " << e.what() << '\n';
    return exit_usage;
  }
  DeploymentBody body = [&options, &actions](Deployment& d) {
    return run_actions(d, options, actions);
  };
  return run_with_deployment(io, *deployment, options.deployment, std::move(body));
}

}  // namespace rex::cli
