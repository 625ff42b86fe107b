// The `rex` command line.
//   rex run [--demo] [--actions FILE] [COMMAND...]   run commands in a local bash session
//   rex server --auth-token T [--port 8000]   serve them over HTTP (as rex-server)
//   rex version
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>
#include <rex/rex.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "server_command.hpp"

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct RunOptions {
  bool demo = false;
  bool json = false;
  std::string actions_file;
  std::vector<std::string> commands;
  double timeout = 30.0;
  std::vector<std::string> startup_source;
};

std::vector<rex::Action> demo_actions() {
  auto bash = [](std::string command) {
    rex::BashAction a;
    a.command = std::move(command);
    a.timeout = 30.0;
    a.check = "silent";
    return a;
  };
  auto interactive = [&](std::string command, std::string expect) {
    rex::BashAction a = bash(std::move(command));
    a.is_interactive_command = true;
    a.expect = {std::move(expect)};
    return a;
  };
  rex::BashAction quit = bash("exit()");
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

std::vector<rex::Action> load_actions(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot open actions file '" + path + "'");
  std::vector<rex::Action> actions;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    try {
      actions.push_back(rex::parse_json<rex::Action>(line));
    } catch (const rex::ProtocolError& e) {
      throw std::runtime_error(fmt::format("{}:{}: {}", path, number, e.what()));
    }
  }
  return actions;
}

void print_step(const rex::Action& action, const rex::BashObservation* obs,
                const std::string* error, double ms, bool json) {
  if (json) {
    boost::json::object line{{"action", rex::to_json(action)}, {"elapsed_ms", ms}};
    if (obs)
      line["observation"] = rex::to_json(*obs);
    if (error)
      line["error"] = *error;
    std::cout << boost::json::serialize(line) << '\n';
    return;
  }
  if (const auto* bash = std::get_if<rex::BashAction>(&action)) {
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
}

asio::awaitable<int> run_actions(rex::Runtime& runtime, RunOptions options,
                                 std::vector<rex::Action> actions) {
  int failures = 0;
  rex::CreateBashSessionRequest create;
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
    } catch (const rex::SwerexException& e) {
      ++failures;
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::string error = fmt::format("{}: {}", e.class_path(), e.what());
      print_step(action, nullptr, &error, ms, options.json);
    }
  }
  co_await runtime.close();
  co_return failures == 0 ? 0 : 1;
}

int run_command(const RunOptions& options) {
  std::vector<rex::Action> actions;
  if (options.demo)
    actions = demo_actions();
  if (!options.actions_file.empty()) {
    auto more = load_actions(options.actions_file);
    actions.insert(actions.end(), more.begin(), more.end());
  }
  for (const auto& c : options.commands) {
    rex::BashAction a;
    a.command = c;
    a.timeout = options.timeout;
    a.check = "silent";
    actions.emplace_back(std::move(a));
  }
  if (actions.empty()) {
    std::cerr << "rex run: nothing to run (give commands, --actions FILE or --demo)\n";
    return 2;
  }
  asio::io_context io;
  rex::LocalRuntime runtime(io.get_executor());
  int status = 1;
  std::exception_ptr error;
  asio::co_spawn(io, run_actions(runtime, options, std::move(actions)),
                 [&](std::exception_ptr e, int s) {
                   error = e;
                   status = s;
                 });
  io.run();
  if (error)
    std::rethrow_exception(error);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rex: run commands for agents in bash sessions and sandboxes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(rex::version()));

  RunOptions run;
  auto* run_cmd =
      app.add_subcommand("run", "Run commands in a local bash session and print the observations");
  run_cmd->add_option("commands", run.commands, "Commands to run, one observation each");
  run_cmd->add_flag("--demo", run.demo,
                    "Run a short built-in demonstration (shell state, exit codes, python3)");
  run_cmd
      ->add_option("--actions", run.actions_file,
                   "A JSON-lines file of actions (bash or bash_interrupt)")
      ->check(CLI::ExistingFile);
  run_cmd->add_option("--timeout", run.timeout, "Timeout per command in seconds")
      ->capture_default_str();
  run_cmd->add_option("--startup-source", run.startup_source,
                      "Files to source when the session starts");
  run_cmd->add_flag("--json", run.json, "Print one JSON object per step");

  rex::cli::ServerOptions server;
  auto* server_cmd = app.add_subcommand(
      "server", "Serve bash sessions, processes and files over HTTP (same as rex-server)");
  rex::cli::add_server_options(*server_cmd, server);

  app.add_subcommand("version", "Print the version")->callback([] {
    std::cout << rex::version() << '\n';
  });

  CLI11_PARSE(app, argc, argv);
  rex::cli::raise_fd_limit();
  if (server_cmd->parsed())
    return rex::cli::run_server(server);
  try {
    if (run_cmd->parsed())
      return run_command(run);
  } catch (const std::exception& e) {
    std::cerr << "rex: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
