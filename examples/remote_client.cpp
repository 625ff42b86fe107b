// Connect to a running server (rex-server, or SWE-ReX's swerex-remote) and use it:
//
//   rex-server --port 8000 --auth-token secret &
//   remote_client http://127.0.0.1:8000 secret
//
// The server's exceptions arrive as the same C++ types a LocalRuntime throws. It checks what it
// sees and exits 1 when something differs (CTest runs it as a test).
#include <rex/rex.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <iostream>
#include <string>

namespace asio = boost::asio;

// Prints a mismatch and counts it.
bool check(bool ok, const std::string& what) {
  if (!ok)
    std::cerr << "remote_client: unexpected " << what << '\n';
  return ok;
}

asio::awaitable<int> use(rex::RemoteRuntime& runtime) {
  int mismatches = 0;
  co_await runtime.wait_until_alive(std::chrono::seconds(10));

  rex::CreateBashSessionRequest create;
  co_await runtime.create_session(create);
  rex::BashAction action;
  action.command = "echo \"hello from $(hostname) as $(whoami)\"";
  auto obs = co_await runtime.run_in_session(action);
  std::cout << obs.output;
  mismatches += !check(obs.output.starts_with("hello from "), "greeting: " + obs.output);

  // Output can also arrive while the command runs.
  action.command = "for i in 1 2 3; do echo \"tick $i\"; sleep 0.1; done";
  std::string streamed;
  auto printer = [&streamed](std::string_view text) {
    std::cout << "streamed: " << text;
    streamed += text;
  };
  obs = co_await runtime.run_in_session_streaming(action, printer);
  mismatches += !check(streamed == "tick 1\ntick 2\ntick 3\n", "stream: " + streamed);

  rex::Command command;
  command.command = std::vector<std::string>{"uname", "-s"};
  auto result = co_await runtime.execute(command);
  std::cout << "execute: " << result.stdout_;
  mismatches += !check(result.stdout_ == "Linux\n", "uname -s: " + result.stdout_);

  bool refused = false;
  try {
    rex::CreateBashSessionRequest again;
    co_await runtime.create_session(again);
  } catch (const rex::SessionExistsError& e) {
    std::cout << "as expected: " << e.what() << '\n';
    refused = true;
  }
  mismatches += !check(refused, "second session named default");
  co_await runtime.close();
  co_return mismatches == 0 ? 0 : 1;
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
  asio::co_spawn(io, use(runtime), [&](std::exception_ptr e, int result) {
    status = result;
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
