// Daytona on this machine, for the tests of DaytonaDeployment: tests/daytona/stack.mjs, which
// runs daytona_fake.py (a stateful fake of Daytona's API and toolbox that runs each sandbox's
// commands here, on an address of its own) behind Stoplight Prism proxies that check every
// request and answer against Daytona's OpenAPI documents. Made once per test process; its API
// URL and key are put in the environment as Daytona's SDKs read them (DAYTONA_API_URL,
// DAYTONA_API_KEY). When the process ends, the stack is stopped and Prism's complaints, if any,
// fail the run (DaytonaStackCheck).
#pragma once

#include <rex/core/temp_file.hpp>
#include <rex/http/client.hpp>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#ifndef REX_DAYTONA_ENV
#error "REX_DAYTONA_ENV, REX_DAYTONA_STACK and REX_NODE must be set by CMake"
#endif

namespace rex::test {

class DaytonaStack {
 public:
  /// Why the stack cannot run here (its environment is not installed), or empty.
  static std::string unavailable() {
    if (!std::filesystem::exists(std::string(REX_DAYTONA_ENV) + "/openapi") ||
        !std::filesystem::exists(std::string(REX_DAYTONA_ENV) + "/node_modules/.bin/prism"))
      return fmt::format(
          "Prism and Daytona's OpenAPI documents are not installed at {} (scripts/common.sh's "
          "rex_daytona_env installs them; scripts/test.sh runs it)",
          REX_DAYTONA_ENV);
    if (!std::filesystem::exists(REX_NODE))
      return fmt::format("node is not installed at {}", REX_NODE);
    return {};
  }

  /// The process's one stack, started on first use.
  static DaytonaStack& get() {
    if (!instance())
      instance().reset(new DaytonaStack());
    return *instance();
  }

  /// Stops the stack if it ran; Prism's complaints and the fake's exit, as text (empty: none).
  static std::string finish() {
    if (!instance())
      return {};
    std::string complaints = instance()->stop();
    instance().reset();
    return complaints;
  }

  const std::string& api_url() const { return api_url_; }
  const std::string& api_key() const { return api_key_; }
  const std::string& fake_url() const { return fake_url_; }

  /// The fake's own listing of what remains (GET /_fake/sandboxes): sandboxes not destroyed, or
  /// with processes or previews still open.
  boost::json::array remaining() {
    asio::io_context io;
    http::Client client(io.get_executor(), fake_url_);
    http::ClientRequest r;
    r.target = "/_fake/sandboxes";
    const http::ClientResponse got = run_async(io, client.request(std::move(r)));
    return boost::json::parse(got.body).as_array();
  }

  /// remaining(), once sandboxes being destroyed are gone (the fake takes its start delay).
  boost::json::array remaining_settled() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    for (;;) {
      boost::json::array left = remaining();
      bool settling = false;
      for (const auto& s : left)
        settling = settling || s.at("state") == "destroying";
      if (!settling || std::chrono::steady_clock::now() > until)
        return left;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  /// Makes the next `count` calls of the API or the toolbox answer 429.
  void throttle(int count) {
    asio::io_context io;
    http::Client client(io.get_executor(), fake_url_);
    http::ClientRequest r;
    r.method = "POST";
    r.target = fmt::format("/_fake/throttle?count={}", count);
    (void)run_async(io, client.request(std::move(r)));
  }

  ~DaytonaStack() { (void)stop(); }

 private:
  static std::unique_ptr<DaytonaStack>& instance() {
    static std::unique_ptr<DaytonaStack> one;
    return one;
  }

  DaytonaStack() {
    log_ = (std::filesystem::path(dir_.path()) / "stack.log").string();
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe failed");
    // stdin is a pipe this process holds: the stack ends when it closes, whatever ends the test.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    // A process group of its own, so that a stack that has to be killed takes the fake and the
    // Prism proxies with it.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    std::string node = REX_NODE, script = REX_DAYTONA_STACK;
    std::string env_var = std::string("REX_DAYTONA_ENV=") + REX_DAYTONA_ENV;
    std::vector<char*> argv{node.data(), script.data(), nullptr};
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e)
      envp.push_back(*e);
    envp.push_back(env_var.data());
    envp.push_back(nullptr);
    const int error =
        ::posix_spawn(&pid_, node.c_str(), &actions, &attributes, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(in[0]);
    stdin_ = in[1];
    if (error != 0)
      throw std::runtime_error("cannot start " + node);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::string out;
    while ((out = read_text(log_)).find("READY ") == std::string::npos ||
           out.find('\n', out.find("READY ")) == std::string::npos) {
      if (std::chrono::steady_clock::now() > until || ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("the Daytona stack did not start: " + out);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto ready = out.find("READY ");
    const std::string line = out.substr(ready, out.find('\n', ready) - ready);
    api_url_ = word_after(line, "api=");
    api_key_ = word_after(line, "key=");
    fake_url_ = word_after(line, "fake=");
    ::setenv("DAYTONA_API_URL", api_url_.c_str(), 1);
    ::setenv("DAYTONA_API_KEY", api_key_.c_str(), 1);
    ::unsetenv("DAYTONA_TARGET");
  }

  static std::string word_after(const std::string& line, const std::string& key) {
    const auto at = line.find(key);
    if (at == std::string::npos)
      return {};
    const auto start = at + key.size();
    return line.substr(start, line.find_first_of(" \n", start) - start);
  }

  std::string stop() {
    if (pid_ <= 0)
      return {};
    ::close(stdin_);
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(-pid_, SIGKILL);  // the whole group: the fake and Prism too
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid_ = -1;
    const std::string out = read_text(log_);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
        out.find("VIOLATIONS 0") != std::string::npos)
      return {};
    const auto at = out.find("VIOLATIONS ");
    return at == std::string::npos ? "the stack ended without its report: " + out.substr(0, 4000)
                                   : out.substr(at, 8000);
  }

  TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string api_url_, api_key_, fake_url_;
};

// Fails the run when Prism found a request or an answer that Daytona's documents do not allow.
class DaytonaStackCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string complaints = DaytonaStack::finish();
    EXPECT_TRUE(complaints.empty()) << complaints;
  }
};

}  // namespace rex::test
