// moto's stand-alone server (an AWS API emulator, PyPI, pinned in tests/aws/requirements.txt)
// as a child process of a test, on a free loopback port, with signature checking on: after the
// first three requests (which create an IAM user, its access key and an allow-all policy)
// every request must be signed with that key, and is checked as AWS checks it.
#pragma once

#include <rex/aws/client.hpp>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#ifndef REX_MOTO_SERVER
#error "REX_MOTO_SERVER must name moto_server (set by CMake)"
#endif

extern char** environ;

namespace rex::test {

/// A loopback TCP port that was free a moment ago.
inline int free_loopback_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(s);
  if (!ok)
    throw std::runtime_error("no free loopback port");
  return ntohs(a.sin_port);
}

/// A port for servers that come and go on it for a whole test run (each task's rex-server of the
/// Fargate emulator): below the kernel's range for ephemeral ports (32768 and up here), so that no
/// socket bound to port 0 in the meantime, by a test running beside it, can take it between two
/// of those servers; free on every address when chosen.
inline int free_port_below_ephemeral() {
  std::random_device random;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = 10000 + static_cast<int>(random() % 10000);
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    if (ok)
      return port;
  }
  throw std::runtime_error("no free port between 10000 and 20000");
}

class MotoServer {
 public:
  /// Why moto cannot run here, or empty.
  static std::string unavailable() {
    if (!std::filesystem::exists(REX_MOTO_SERVER))
      return fmt::format(
          "moto's server is not installed at {} (scripts/common.sh's "
          "rex_moto_env installs it; scripts/test.sh runs it)",
          REX_MOTO_SERVER);
    return {};
  }

  MotoServer() {
    port_ = free_loopback_port();
    const std::string log = (std::filesystem::path(dir_.path()) / "moto.log").string();
    // Signature checking from the fourth request on; AWS's managed policies loaded.
    ScopedEnv no_auth("INITIAL_NO_AUTH_ACTION_COUNT", "3");
    ScopedEnv managed("MOTO_IAM_LOAD_MANAGED_POLICIES", "true");
    pid_ = spawn_logged({REX_MOTO_SERVER, "-H", "127.0.0.1", "-p", std::to_string(port_)}, log);
    if (pid_ < 0)
      throw std::runtime_error("cannot start " REX_MOTO_SERVER);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!answers()) {
      if (std::chrono::steady_clock::now() > until || ::waitpid(pid_, nullptr, WNOHANG) == pid_)
        throw std::runtime_error("moto_server did not start listening: " + read_text(log));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  ~MotoServer() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }

  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }

  /// Every service at this server, in `region`, with `credentials`.
  aws::AwsConfig config(aws::Credentials credentials, std::string region = "us-east-1") const {
    aws::AwsConfig c;
    c.credentials = std::move(credentials);
    c.region = std::move(region);
    c.endpoint_url = url();
    c.backoff.initial_delay = std::chrono::milliseconds(10);
    return c;
  }

  /// The three unchecked requests: an IAM user with an access key and an allow-all policy.
  /// Returns that key; every later request must be signed with it.
  aws::Credentials make_user(asio::io_context& io) const {
    aws::AwsClient anyone(io.get_executor(),
                          config(aws::Credentials{"AKIDANYONE", "anything", "", "setup"}));
    run_async(io, anyone.query_call(aws::kIam, "CreateUser", {{"UserName", "rex-test"}}));
    const aws::XmlElement key =
        run_async(io, anyone.query_call(aws::kIam, "CreateAccessKey", {{"UserName", "rex-test"}}));
    run_async(io, anyone.query_call(
                      aws::kIam, "PutUserPolicy",
                      {{"UserName", "rex-test"},
                       {"PolicyName", "all"},
                       {"PolicyDocument", R"({"Version":"2012-10-17","Statement":[{"Effect":)"
                                          R"("Allow","Action":"*","Resource":"*"}]})"}}));
    return aws::Credentials{key.text_at("CreateAccessKeyResult/AccessKey/AccessKeyId"),
                            key.text_at("CreateAccessKeyResult/AccessKey/SecretAccessKey"), "",
                            "moto's user rex-test"};
  }

 private:
  bool answers() const {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port_));
    const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return ok;
  }

  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace rex::test
