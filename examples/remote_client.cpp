// Connect to a running server (rex-server, or SWE-ReX's swerex-remote) and use it:
//
//   rex-server --port 8000 --auth-token secret &
//   remote_client http://127.0.0.1:8000 secret
//
// The server's exceptions arrive as the same C++ types a LocalRuntime throws.
#include <rex/rex.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <iostream>

namespace asio = boost::asio;

asio::awaitable<void> use(rex::RemoteRuntime& runtime) {
  co_await runtime.wait_until_alive(std::chrono::seconds(10));

  rex::CreateBashSessionRequest create;
  co_await runtime.create_session(create);
  rex::BashAction action;
  action.command = "echo \"hello from $(hostname) as $(whoami)\"";
  auto obs = co_await runtime.run_in_session(action);
  std::cout << obs.output;

  // Output can also arrive while the command runs.
  action.command = "for i in 1 2 3; do echo \"tick $i\"; sleep 0.1; done";
  auto printer = [](std::string_view text) { std::cout << "streamed: " << text; };
  co_await runtime.run_in_session_streaming(action, printer);

  rex::Command command;
  command.command = std::vector<std::string>{"uname", "-s"};
  auto result = co_await runtime.execute(command);
  std::cout << "execute: " << result.stdout_;

  try {
    rex::CreateBashSessionRequest again;
    co_await runtime.create_session(again);
  } catch (const rex::SessionExistsError& e) {
    std::cout << "as expected: " << e.what() << '\n';
  }
  co_await runtime.close();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: remote_client URL [TOKEN]\n";
    return 2;
  }
  asio::io_context io;
  rex::RemoteRuntimeConfig config;
  config.url = argv[1];
  config.auth_token = argc > 2 ? argv[2] : "";
  rex::RemoteRuntime runtime(io.get_executor(), config);
  int status = 0;
  asio::co_spawn(io, use(runtime), [&](std::exception_ptr e) {
    if (!e)
      return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& error) {
      std::cerr << "remote_client: " << error.what() << '\n';
      status = 1;
    }
  });
  io.run();
  return status;
}
