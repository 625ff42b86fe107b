// DummyRuntime: a Runtime that runs nothing. run_in_session hands out scripted observations (or
// errors) in order, files live in memory, and every action received is recorded, so an agent's
// control flow can be tested in microseconds and without a shell.
//
// It keeps the protocol's rules that agents depend on: a session must be created before use
// (SessionDoesNotExistError otherwise), a name cannot be taken twice (SessionExistsError), and
// reading a file never written is FileNotFoundError.
//
// Threading: call every member from one thread; the coroutines complete without suspending.
#pragma once

#include <rex/runtime/runtime.hpp>

#include <deque>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace rex {

class DummyRuntime final : public Runtime {
 public:
  explicit DummyRuntime(std::vector<BashObservation> run_in_session_outputs = {});

  /// The next run_in_session answers with this observation.
  void queue(BashObservation observation);
  /// The next run_in_session throws this error instead.
  void queue_error(std::exception_ptr error);
  /// The answer once the queue is empty (by default: empty output, exit code 0).
  void set_default(BashObservation observation);
  /// is_alive answers this (default true).
  void set_alive(bool alive);

  /// Every action run_in_session received, in order.
  const std::vector<Action>& received() const noexcept;
  /// Every command execute received, in order.
  const std::vector<Command>& executed() const noexcept;
  /// The in-memory file system: path -> content.
  const std::map<std::string, std::string>& files() const noexcept;

  asio::awaitable<IsAliveResponse> is_alive() override;
  asio::awaitable<CreateBashSessionResponse> create_session(
      CreateBashSessionRequest request) override;
  asio::awaitable<BashObservation> run_in_session(Action action) override;
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest request) override;
  /// Answers exit code 0 with empty output.
  asio::awaitable<CommandResponse> execute(Command command) override;
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest request) override;
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest request) override;
  /// Reads a local file (or each file of a directory) into the in-memory file system.
  asio::awaitable<UploadResponse> upload(UploadRequest request) override;
  /// Writes an in-memory file (or every file below a directory path) to the local target.
  asio::awaitable<DownloadResponse> download(DownloadRequest request) override;
  asio::awaitable<CloseResponse> close() override;

 private:
  struct Scripted {
    BashObservation observation;
    std::exception_ptr error;
  };
  std::deque<Scripted> queue_;
  BashObservation default_;
  bool alive_ = true;
  std::set<std::string> sessions_;
  std::vector<Action> received_;
  std::vector<Command> executed_;
  std::map<std::string, std::string> files_;
};

}  // namespace rex
