// EngineError: a container engine refused a call or could not be reached. Its message says what
// failed and for what (the image or container), carries the engine's own message, and ends with
// a hint how to fix it.
#pragma once

#include <stdexcept>
#include <string>

namespace rex::docker {

class EngineError : public std::runtime_error {
 public:
  /// status: the HTTP status of the engine's answer, 0 when there was no answer at all (the
  /// engine could not be reached, or did not answer in time).
  EngineError(std::string what, unsigned status, std::string engine_message);

  unsigned status() const noexcept { return status_; }
  /// The engine's own message ("No such image: x:latest"), empty when it sent none.
  const std::string& engine_message() const noexcept { return engine_message_; }

 private:
  unsigned status_;
  std::string engine_message_;
};

}  // namespace rex::docker
