// The smallest rex program: a local bash session, a few commands, an interactive python3.
// It checks what it sees and exits 1 when something differs (CTest runs it as a test).
#include <rex/rex.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>
#include <string>

namespace asio = boost::asio;

// Prints a mismatch and counts it.
bool check(bool ok, const std::string& what) {
  if (!ok)
    std::cerr << "hello_session: unexpected " << what << '\n';
  return ok;
}

asio::awaitable<int> agent(rex::Runtime& runtime) {
  int mismatches = 0;
  rex::CreateBashSessionRequest create;
  co_await runtime.create_session(create);

  rex::BashAction action;
  action.command = "cd /tmp && echo \"working in $PWD\"";
  auto obs = co_await runtime.run_in_session(action);
  std::cout << obs.output;
  mismatches += !check(obs.output == "working in /tmp\n", "output: " + obs.output);

  action.command = "python3 -q";
  action.is_interactive_command = true;
  action.expect = {">>> "};
  co_await runtime.run_in_session(action);
  action.command = "print(2 ** 10)";
  obs = co_await runtime.run_in_session(action);
  std::cout << "python says " << obs.output << '\n';
  mismatches += !check(obs.output == "1024", "python output: " + obs.output);
  action = rex::BashAction{};
  action.command = "exit()";
  action.is_interactive_quit = true;
  co_await runtime.run_in_session(action);

  bool failed = false;
  try {
    rex::BashAction failing;
    failing.command = "ls /does-not-exist";
    co_await runtime.run_in_session(failing);
  } catch (const rex::NonZeroExitCodeError& e) {
    std::cout << "failed as expected: " << e.extra_info().at("exit_code") << '\n';
    failed = true;
  }
  mismatches += !check(failed, "success of ls /does-not-exist");
  co_await runtime.close();
  co_return mismatches == 0 ? 0 : 1;
}

int main() {
  asio::io_context io;
  rex::LocalRuntime runtime(io.get_executor());
  int status = 1;
  asio::co_spawn(io, agent(runtime), [&status](std::exception_ptr e, int result) {
    if (e)
      std::rethrow_exception(e);
    status = result;
  });
  io.run();
  return status;
}
