// A scripted agent: the loop an LLM agent runs, with the model replaced by a fixed plan. It
// works against any deployment; pick one on the command line:
//
//   agent_loop                                  a local bash session (the default)
//   agent_loop '{"type":"docker","image":"python:3.11"}'
//   agent_loop config.json
//
// Each step is a shell command, a line typed into a python3 REPL, or a file edit; every
// failure is an observation the agent reacts to, never a crash.
#include <rex/backends/local/local_config.hpp>
#include <rex/rex.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>

#include <iostream>

namespace asio = boost::asio;

namespace {

rex::BashAction shell(std::string command, double timeout = 30) {
  rex::BashAction a;
  a.command = std::move(command);
  a.timeout = timeout;
  a.check = "silent";  // a failing command is an observation, not an exception
  return a;
}

// One step: run it, show what the agent would feed back to its model.
asio::awaitable<rex::BashObservation> step(rex::Runtime& runtime, rex::BashAction action) {
  std::cout << "> " << action.command << '\n';
  try {
    auto obs = co_await runtime.run_in_session(action);
    std::cout << obs.output;
    if (!obs.output.empty() && obs.output.back() != '\n')
      std::cout << '\n';
    if (obs.exit_code && *obs.exit_code != 0)
      std::cout << fmt::format("[exit {}]\n", *obs.exit_code);
    co_return obs;
  } catch (const rex::CommandTimeoutError& e) {
    // The command hung: the agent interrupts it and tells the model.
    std::cout << "[timed out: " << e.what() << "]\n";
  }
  rex::BashInterruptAction interrupt;
  co_await runtime.run_in_session(interrupt);
  rex::BashObservation timed_out;
  timed_out.output = "(command timed out and was interrupted)";
  co_return timed_out;
}

asio::awaitable<int> agent(rex::Runtime& runtime) {
  rex::CreateBashSessionRequest create;
  create.startup_timeout = 30;
  co_await runtime.create_session(create);

  // 1. Look around and make a small project.
  co_await step(runtime, shell("mkdir -p /tmp/agent-demo && cd /tmp/agent-demo && pwd"));
  rex::WriteFileRequest write;
  write.path = "/tmp/agent-demo/calc.py";
  write.content = "def add(a, b):\n    return a - b  # bug\n";
  co_await runtime.write_file(write);

  // 2. Run a test; it fails, and the agent reads the failure.
  const std::string test = "python3 -c 'import calc; assert calc.add(2, 3) == 5, calc.add(2, 3)'";
  auto failed = co_await step(runtime, shell(test));

  // 3. Edit the file: read, change, write back.
  rex::ReadFileRequest read;
  read.path = write.path;
  auto source = (co_await runtime.read_file(read)).content;
  // (The fix changes the file's size too: python's bytecode cache trusts size and mtime, and
  // both writes can fall within one second.)
  const std::string wrong = "a - b  # bug";
  const auto bug = source.find(wrong);
  if (bug != std::string::npos)
    source.replace(bug, wrong.size(), "a + b");
  write.content = source;
  co_await runtime.write_file(write);
  auto fixed = co_await step(runtime, shell(test));

  // 4. Use an interactive program: a python3 REPL, line by line.
  rex::BashAction repl = shell("python3 -q");
  repl.is_interactive_command = true;
  repl.expect = {">>> "};
  co_await step(runtime, repl);
  repl.command = "import calc; print(calc.add(40, 2))";
  auto answer = co_await step(runtime, repl);
  rex::BashAction quit = shell("exit()");
  quit.is_interactive_quit = true;
  co_await step(runtime, quit);

  // 5. A command that hangs is interrupted; the session stays usable.
  co_await step(runtime, shell("sleep 100", 1));
  auto after = co_await step(runtime, shell("echo still here"));

  // 6. Errors of the runtime itself are exceptions with precise types.
  try {
    read.path = "/tmp/agent-demo/missing.txt";
    co_await runtime.read_file(read);
  } catch (const rex::FileNotFoundError& e) {
    std::cout << "[no such file: " << e.what() << "]\n";
  }
  co_await runtime.close();

  const bool ok = failed.exit_code != 0 && fixed.exit_code == 0 &&
                  answer.output.find("42") != std::string::npos && after.output == "still here\n";
  std::cout << (ok ? "agent loop: all steps behaved as expected\n" : "agent loop: FAILED\n");
  co_return ok ? 0 : 1;
}

asio::awaitable<int> run(rex::Deployment& deployment) {
  co_await deployment.start();
  std::exception_ptr failure;
  int status = 1;
  try {
    status = co_await agent(deployment.runtime());
  } catch (...) {
    failure = std::current_exception();
  }
  co_await deployment.stop();  // also when the agent failed: nothing is left running
  if (failure)
    std::rethrow_exception(failure);
  co_return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    rex::DeploymentConfig config = rex::LocalDeploymentConfig{};
    if (argc > 1) {
      const std::string arg = argv[1];
      config = arg.starts_with("{") ? rex::deployment_config_from_json(boost::json::parse(arg))
                                    : rex::load_deployment_config(arg);
    }
    asio::io_context io;
    auto deployment = rex::make_deployment(io.get_executor(), config);
    int status = 1;
    asio::co_spawn(io, run(*deployment), [&](std::exception_ptr e, int s) {
      if (e)
        std::rethrow_exception(e);
      status = s;
    });
    io.run();
    return status;
  } catch (const std::exception& e) {
    std::cerr << "agent_loop: " << e.what() << '\n';
    return 1;
  }
}
