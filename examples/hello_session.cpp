// The smallest rex program: a local bash session, a few commands, an interactive python3.
#include <rex/rex.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>

namespace asio = boost::asio;

asio::awaitable<void> agent(rex::Runtime& runtime) {
  rex::CreateBashSessionRequest create;
  co_await runtime.create_session(create);

  rex::BashAction action;
  action.command = "cd /tmp && echo \"working in $PWD\"";
  auto obs = co_await runtime.run_in_session(action);
  std::cout << obs.output;

  action.command = "python3 -q";
  action.is_interactive_command = true;
  action.expect = {">>> "};
  co_await runtime.run_in_session(action);
  action.command = "print(2 ** 10)";
  obs = co_await runtime.run_in_session(action);
  std::cout << "python says " << obs.output << '\n';
  action = rex::BashAction{};
  action.command = "exit()";
  action.is_interactive_quit = true;
  co_await runtime.run_in_session(action);

  try {
    rex::BashAction failing;
    failing.command = "ls /does-not-exist";
    co_await runtime.run_in_session(failing);
  } catch (const rex::NonZeroExitCodeError& e) {
    std::cout << "failed as expected: " << e.extra_info().at("exit_code") << '\n';
  }
  co_await runtime.close();
}

int main() {
  asio::io_context io;
  rex::LocalRuntime runtime(io.get_executor());
  asio::co_spawn(io, agent(runtime), [](std::exception_ptr e) {
    if (e)
      std::rethrow_exception(e);
  });
  io.run();
}
