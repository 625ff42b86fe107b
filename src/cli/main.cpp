// The `rex` command line.
//   rex run [COMMAND...] [--actions FILE] [--demo] [deployment flags]   observations of commands
//   rex shell [deployment flags]   an interactive session for a person
//   rex eval INSTANCES.jsonl --output DIR [--parallel N] [deployment flags]   one fresh sandbox
//                                  per instance, many at once, results appended to DIR
//   rex swebench --dataset_name FILE --predictions_path FILE|gold --run_id ID [deployment flags]
//                                  SWE-bench's harness: its files and verdicts, on any deployment
//   rex gc [--all] [--dry-run] [--deployment NAME] [deployment flags]   remove the sandboxes
//                                  that rex processes left behind
//   rex server --auth-token T [--port 8000]   serve sessions over HTTP (as rex-server)
//   rex gateway [--listen ADDR] [--storage DIR] [--registry DIR] [--config FILE]
//                                  serve sandboxes as a service (sessions, logs, artifacts)
//   rex backends   the backends this build has (and those it was built without)
//   rex version
// Exit status: 0 done, 1 a step or the deployment failed (eval: an instance's result is an
// error), 2 bad usage (flags, config, instances file), 128 + N after signal N.
#include <rex/backends/backends.hpp>
#include <rex/version.hpp>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <iostream>

#include "deployment_options.hpp"
#include "eval_command.hpp"
#include "gateway_command.hpp"
#include "gc_command.hpp"
#include "run_command.hpp"
#include "server_command.hpp"
#include "shell_command.hpp"
#include "swebench_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"rex: run commands for agents in bash sessions and sandboxes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(rex::version()));

  rex::cli::RunOptions run;
  auto* run_cmd = app.add_subcommand(
      "run", "Run commands in a bash session of a deployment and print the observations");
  rex::cli::add_run_options(*run_cmd, run);

  rex::cli::ShellOptions shell;
  auto* shell_cmd =
      app.add_subcommand("shell", "An interactive bash session in a deployment, for a person");
  rex::cli::add_shell_options(*shell_cmd, shell);

  rex::cli::EvalOptions eval;
  auto* eval_cmd = app.add_subcommand(
      "eval", "Run every instance of a JSON-lines file in a fresh sandbox of its own, in parallel");
  rex::cli::add_eval_options(*eval_cmd, eval);

  rex::cli::SwebenchOptions swebench;
  auto* swebench_cmd = app.add_subcommand(
      "swebench",
      "SWE-bench's evaluation harness: a dataset and predictions, graded as swebench "
      "5.0.2 grades them, on any deployment");
  rex::cli::add_swebench_options(*swebench_cmd, swebench);

  rex::cli::GcCommandOptions gc;
  auto* gc_cmd = app.add_subcommand(
      "gc",
      "Remove the sandboxes of rex processes that are gone, and expired ones, on any backend "
      "that can list them (docker by default)");
  rex::cli::add_gc_options(*gc_cmd, gc);

  rex::cli::GatewayOptions gateway;
  auto* gateway_cmd = app.add_subcommand(
      "gateway", "Serve sandboxes as a service: sessions, lifetimes, logs, artifacts, events");
  rex::cli::add_gateway_options(*gateway_cmd, gateway);

  rex::cli::ServerOptions server;
  auto* server_cmd = app.add_subcommand(
      "server", "Serve bash sessions, processes and files over HTTP (same as rex-server)");
  rex::cli::add_server_options(*server_cmd, server);

  app.add_subcommand("backends", "List the backends this build has, and those it has not")
      ->callback([] {
        for (const rex::Backend& b : rex::backends())
          fmt::print("{:<11} {}\n", b.name, b.summary);
        for (const rex::BackendAlias& a : rex::backend_aliases())
          fmt::print("{:<11} {}\n", a.name, a.summary);
        for (const rex::MissingBackend& m : rex::missing_backends())
          fmt::print("{:<11} not in this build: {}\n", m.name, m.reason);
      });
  app.add_subcommand("version", "Print the version")->callback([] {
    std::cout << rex::version() << '\n';
  });

  rex::cli::rewrite_swebench_arguments(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int printed = app.exit(e);  // prints help, the version, or the error
    return printed == 0 ? 0 : rex::cli::exit_usage;
  }
  rex::cli::raise_fd_limit();
  if (server_cmd->parsed())
    return rex::cli::run_server(server);
  if (gc_cmd->parsed())
    return rex::cli::gc_command(gc);
  if (gateway_cmd->parsed())
    return rex::cli::gateway_command(gateway);
  try {
    if (run_cmd->parsed())
      return rex::cli::run_command(run);
    if (shell_cmd->parsed())
      return rex::cli::shell_command(shell);
    if (eval_cmd->parsed())
      return rex::cli::eval_command(eval);
    if (swebench_cmd->parsed())
      return rex::cli::swebench_command(swebench);
  } catch (const std::exception& e) {
    std::cerr << "rex: " << e.what() << '\n';
    return rex::cli::exit_failure;
  }
  return 0;
}
