// The runtime conformance suite: the behaviour every Runtime must show, run against real bash in
// a real pty. The tests (conformance_suite.cpp) are parameterised over runtime factories; an
// executable that links the suite instantiates it with its own factories:
//
//   INSTANTIATE_TEST_SUITE_P(Runtimes, RuntimeConformance, ::testing::Values(factory...),
//                            [](const auto& info) { return info.param.name; });
//
// Runtimes whose files and processes are not this process's (a container) run the same tests:
// every path on the runtime's side is made through the runtime, and checks of processes and
// descriptors look at the runtime's side through the runtime.
#pragma once

#include <rex/runtime/runtime.hpp>

#include <gtest/gtest.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace rex::test {

struct RuntimeFactory {
  std::string name;
  std::function<std::unique_ptr<Runtime>(asio::io_context&)> make;
  // True when the runtime's files and processes are this machine's, seen from this process
  // (Local, and remote servers running in this process). False for a container: tests then
  // make their remote-side paths through the runtime itself, and check the runtime's processes
  // and descriptors through the runtime instead of this process's children/fds (a check that
  // cannot be made that way is skipped with a GTEST_SKIP saying why).
  bool shares_host = true;
  // How many commands another session must answer while a huge output streams
  // (HugeOutputDoesNotStallOtherSessions). 20 where a round trip is a fraction of a millisecond;
  // fewer only where the path's round trip is long against the stream's time (Daytona's, through
  // a validating proxy: a tenth of a second).
  int answers_while_streaming = 20;
};

std::ostream& operator<<(std::ostream& os, const RuntimeFactory& factory);

class RuntimeConformance : public ::testing::TestWithParam<RuntimeFactory> {
 protected:
  void SetUp() override;
  // Removes the runtime-side directories, closes every session and destroys the runtime.
  void TearDown() override;

  // Runs a test body on the io_context under a deadline.
  void run(std::function<asio::awaitable<void>(Runtime&)> body,
           std::chrono::seconds deadline = std::chrono::seconds(60));

  bool shares_host() const { return GetParam().shares_host; }
  int answers_while_streaming() const { return GetParam().answers_while_streaming; }

  // A fresh, empty directory on the runtime's side, made through the runtime (so it exists where
  // the runtime's files are, container or not) and removed through it in TearDown.
  asio::awaitable<std::string> remote_temp_dir(Runtime& runtime);

  asio::io_context io_;
  std::unique_ptr<Runtime> runtime_;

 private:
  std::vector<std::string> remote_dirs_;
};

}  // namespace rex::test
