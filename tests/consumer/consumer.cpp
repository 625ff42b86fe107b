// A program of an outside project: one command in a local bash session, through rex::rex as
// installed. Exits 0 when it sees the answer it expects.
#include <rex/rex.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <exception>

namespace asio = boost::asio;

asio::awaitable<int> run(rex::Runtime& runtime) {
  // A named request: g++ 12 miscompiles braced temporaries inside co_await expressions.
  rex::CreateBashSessionRequest create;
  co_await runtime.create_session(create);
  rex::BashAction action;
  action.command = "echo $((6 * 7))";
  const rex::BashObservation observation = co_await runtime.run_in_session(action);
  co_await runtime.close();
  std::printf("consumer: %s", observation.output.c_str());
  co_return observation.output == "42\n" ? 0 : 1;
}

int main() {
  asio::io_context io;
  rex::LocalRuntime runtime(io.get_executor());
  int status = 2;
  asio::co_spawn(io, run(runtime), [&status](std::exception_ptr e, int result) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "consumer: %s\n", error.what());
      }
      return;
    }
    status = result;
  });
  io.run();
  return status;
}
