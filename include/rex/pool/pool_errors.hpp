// The errors a SandboxPool throws besides those of the deployments it runs.
#pragma once

#include <stdexcept>
#include <string>

namespace rex {

/// The pool is shut down: acquire() after shutdown(), a waiter woken by shutdown(), or a lease
/// whose sandbox shutdown() stopped.
class SandboxPoolClosedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A sandbox could not be started in config.start_attempts attempts. what():
/// "sandbox failed to start after 3 attempts: <the last attempt's error>".
class SandboxStartError : public std::runtime_error {
 public:
  SandboxStartError(int attempts, std::string cause);
  int attempts() const noexcept { return attempts_; }
  /// The last attempt's error message (a DeploymentStartupError's, usually).
  const std::string& cause() const noexcept { return cause_; }

 private:
  int attempts_;
  std::string cause_;
};

}  // namespace rex
