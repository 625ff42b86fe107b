// Helpers shared by the docker tests: checking that the engine answers, and running one command
// in a session of its own.
#pragma once

#include <rex/docker/engine.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <string>

#include "support/async_test.hpp"

namespace rex::test {

/// Empty when the engine answers; otherwise why not and how to get one, for FAIL().
inline std::string engine_missing(asio::io_context& io, docker::Engine& engine) {
  try {
    run_async(io, engine.version(), std::chrono::seconds(20));
    return {};
  } catch (const docker::EngineError& e) {
    return std::string("no container engine (scripts/common.sh's rex_docker_setup starts one): ") +
           e.what();
  }
}

/// Creates session "t", runs `text` in it (check "silent", 20 s timeout), closes the session.
inline asio::awaitable<BashObservation> run_in_own_session(Runtime& runtime, std::string text) {
  CreateBashSessionRequest create;
  create.startup_timeout = 20;
  create.session = "t";
  co_await runtime.create_session(create);
  BashAction action;
  action.command = std::move(text);
  action.timeout = 20;
  action.check = "silent";
  action.session = "t";
  auto obs = co_await runtime.run_in_session(action);
  CloseBashSessionRequest close;
  close.session = "t";
  co_await runtime.close_session(close);
  co_return obs;
}

}  // namespace rex::test
