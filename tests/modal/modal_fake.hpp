// Modal on this machine, for the tests of ModalDeployment: tests/modal/modal_fake.py (a fake of
// Modal's gRPC control plane built on the pinned `modal` package's own generated code; it runs
// each sandbox's entrypoint here, on a loopback address of its own, behind a TLS tunnel whose CA
// it makes at start), run from the Python environment rex_modal_env builds. Each ModalFake is
// one fake process; shared() is the process's one, whose URL and token pair are put in the
// environment as Modal's SDKs read them.
#pragma once

#include <fmt/core.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/test_helpers.hpp"

#ifndef REX_MODAL_PYTHON
#error "REX_MODAL_PYTHON and REX_MODAL_FAKE must be set by CMake"
#endif

namespace rex::test {

class ModalFake {
 public:
  /// Why the fake cannot run here, or empty.
  static std::string unavailable() {
    if (!std::filesystem::exists(REX_MODAL_PYTHON))
      return fmt::format(
          "Modal's SDK is not installed at {} (scripts/common.sh's rex_modal_env installs it; "
          "scripts/test.sh runs it)",
          REX_MODAL_PYTHON);
    return {};
  }

  /// The process's shared fake, started on first use; MODAL_SERVER_URL, MODAL_TOKEN_ID and
  /// MODAL_TOKEN_SECRET name it, and MODAL_CONFIG_PATH a settings file that is not there (so
  /// that the machine's ~/.modal.toml plays no part).
  static ModalFake& shared() {
    static std::unique_ptr<ModalFake> one = [] {
      auto fake = std::make_unique<ModalFake>();
      ::setenv("MODAL_CONFIG_PATH", (fake->dir_.path() + "/no-settings.toml").c_str(), 1);
      ::setenv("MODAL_SERVER_URL", fake->url().c_str(), 1);
      ::setenv("MODAL_TOKEN_ID", fake->token_id().c_str(), 1);
      ::setenv("MODAL_TOKEN_SECRET", fake->token_secret().c_str(), 1);
      ::unsetenv("MODAL_ENVIRONMENT");
      return fake;
    }();
    return *one;
  }

  explicit ModalFake(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{REX_MODAL_PYTHON, REX_MODAL_FAKE, "--port",     "0",
                                  "--state-dir",    dir_.path(),    "--token-id", token_id_,
                                  "--token-secret", token_secret_};
    args.insert(args.end(), extra.begin(), extra.end());
    log_ = dir_.path() + "/fake.log";
    pid_ = spawn_logged(std::move(args), log_);
    if (pid_ <= 0)
      throw std::runtime_error("cannot start the Modal fake");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::string out;
    while ((out = read_text(log_)).find("READY ") == std::string::npos ||
           out.find('\n', out.find("READY ")) == std::string::npos) {
      if (std::chrono::steady_clock::now() > until || ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("the Modal fake did not start: " + out);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto at = out.find("READY ") + 6;
    const auto space = out.find(' ', at);
    port_ = std::stoi(out.substr(at, space - at));
    ca_file_ = out.substr(space + 1, out.find('\n', space) - space - 1);
  }

  ~ModalFake() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  ModalFake(const ModalFake&) = delete;
  ModalFake& operator=(const ModalFake&) = delete;

  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  const std::string& token_id() const { return token_id_; }
  const std::string& token_secret() const { return token_secret_; }
  /// The CA of the tunnels' certificates.
  const std::string& ca_file() const { return ca_file_; }
  std::string log() const { return read_text(log_); }

  /// The fake's sandboxes.json: every sandbox with its state and the pids still alive.
  boost::json::array sandboxes() const {
    const std::string text = read_text(dir_.path() + "/sandboxes.json");
    if (text.empty())
      return {};
    const boost::json::value v = boost::json::parse(text);
    if (v.is_array())
      return v.as_array();
    if (const auto* o = v.if_object(); o && o->contains("sandboxes"))
      return o->at("sandboxes").as_array();
    return {};
  }

  /// The sandboxes still running or with a process alive, once the fake has caught up.
  boost::json::array running() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      boost::json::array left;
      for (const auto& s : sandboxes()) {
        const auto& o = s.as_object();
        const auto* alive = o.if_contains("alive_pids");
        if (o.at("state") == "running" ||
            (alive && alive->is_array() && !alive->as_array().empty()))
          left.push_back(s);
      }
      if (left.empty() || std::chrono::steady_clock::now() > until)
        return left;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

 private:
  TempDir dir_;
  std::string token_id_ = "ak-rex-test";
  std::string token_secret_ = "as-rex-test";
  std::string log_;
  std::string ca_file_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace rex::test
