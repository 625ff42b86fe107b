// Fargate on this machine, for the tests of FargateDeployment: moto's server as the control
// plane (every signature checked; tasks held RUNNING through its state manager), and in front of
// it tests/aws/fargate_data_plane.py, which passes every call through untouched and does what
// moto does not: it runs a task's sandbox as a rex-server on an address of its own,
// 127.0.0.N:<port>, with the token the task was given, stops it with the task, and gives the
// task's network interface that address as its public one. Made once per test process; its keys and
// endpoint are put in the environment as the AWS CLI reads them.
#pragma once

#include <rex/aws/client.hpp>
#include <rex/http/client.hpp>

#include <fmt/core.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "aws/moto_server.hpp"
#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#ifndef REX_MOTO_PYTHON
#error "REX_MOTO_PYTHON, REX_FARGATE_DATA_PLANE and REX_SERVER_BUILT must be set by CMake"
#endif

namespace rex::test {

class FargateEmulator {
 public:
  /// The process's one emulator, started on first use.
  static FargateEmulator& get() {
    static std::unique_ptr<FargateEmulator> one(new FargateEmulator());
    return *one;
  }

  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  int sandbox_port() const { return sandbox_port_; }
  const aws::Credentials& keys() const { return keys_; }
  /// What the data plane did, as JSON lines ({"event": "run"|"stop", "task", "pid", "port",
  /// "address"}).
  std::string events() const { return read_text(state_); }

  /// A client of the emulator with the test user's keys (or others).
  aws::AwsConfig config(std::optional<aws::Credentials> other = std::nullopt) const {
    aws::AwsConfig c = moto_.config(other.value_or(keys_));
    c.endpoint_url = url();
    return c;
  }

  ~FargateEmulator() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

 private:
  FargateEmulator() {
    asio::io_context io;
    keys_ = moto_.make_user(io);
    hold_tasks_running(io);
    port_ = free_loopback_port();
    sandbox_port_ = free_port_below_ephemeral();
    state_ = (std::filesystem::path(dir_.path()) / "data-plane.jsonl").string();
    const std::string log = (std::filesystem::path(dir_.path()) / "data-plane.log").string();
    pid_ =
        spawn_logged({REX_MOTO_PYTHON, REX_FARGATE_DATA_PLANE, moto_.url(), std::to_string(port_),
                      REX_SERVER_BUILT, std::to_string(sandbox_port_), state_},
                     log);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (read_text(log).find("listening") == std::string::npos) {
      if (std::chrono::steady_clock::now() > until || ::waitpid(pid_, nullptr, WNOHANG) == pid_)
        throw std::runtime_error("the Fargate data plane did not start: " + read_text(log));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // As the AWS CLI and rex read them.
    ::setenv("AWS_ACCESS_KEY_ID", keys_.access_key_id.c_str(), 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", keys_.secret_access_key.c_str(), 1);
    ::unsetenv("AWS_SESSION_TOKEN");
    ::unsetenv("AWS_PROFILE");
    ::setenv("AWS_REGION", "us-east-1", 1);
    ::setenv("AWS_ENDPOINT_URL", url().c_str(), 1);
  }

  // moto moves a task on from RUNNING at each look unless told to wait for a manual advance.
  void hold_tasks_running(asio::io_context& io) {
    rex::http::Client client(io.get_executor(), moto_.url());
    rex::http::ClientRequest r;
    r.method = "POST";
    r.target = "/moto-api/state-manager/set-transition";
    r.headers = {{"Content-Type", "application/json"}};
    r.body =
        R"({"model_name": "ecs::task", "transition": {"progression": "manual", "times": 1000000}})";
    const rex::http::ClientResponse got = run_async(io, client.request(std::move(r)));
    if (got.status != 201 && got.status != 200)
      throw std::runtime_error(
          fmt::format("moto's state manager answered {}: {}", got.status, got.body));
  }

  MotoServer moto_;
  TempDir dir_;
  aws::Credentials keys_;
  int port_ = 0;
  int sandbox_port_ = 0;
  std::string state_;
  pid_t pid_ = -1;
};

}  // namespace rex::test
