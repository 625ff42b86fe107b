// The background processes of a LocalRuntime (rex/protocol/processes.hpp): each in a process
// group of its own with pipes for stdout and stderr (and stdin when asked), read as the output
// comes and handed to every listener; a process leaves the table when it has exited and its
// pipes are at end of file (its reader reaps it). kill_all() and destroying the table kill every
// group; a process whose reader never runs again is reaped when its record goes.
// Internal to the library. Threading: the executor it was made with.
#pragma once

#include <rex/runtime/runtime.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <map>
#include <memory>

namespace rex::detail {

class ProcessTable {
 public:
  explicit ProcessTable(asio::any_io_executor executor);
  ~ProcessTable();
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  asio::awaitable<std::optional<ProcessEnd>> start(ProcessConfig config,
                                                   Runtime::ProcessListener on_event);
  asio::awaitable<std::optional<ProcessEnd>> connect(ProcessSelector which,
                                                     Runtime::ProcessListener on_event);
  ProcessListResponse list() const;
  asio::awaitable<void> input(ProcessInput input);
  void signal(const ProcessSignal& signal);
  void resize(const ProcessResize& resize);
  /// SIGKILL to every process's group (the runtime's close and the server's shutdown).
  void kill_all() noexcept;

  struct Process;
  using Processes = std::map<long, std::shared_ptr<Process>>;

 private:
  asio::any_io_executor ex_;
  std::shared_ptr<Processes> processes_;  // shared with each process's reader
};

/// A signal's number from its name ("SIGTERM", "TERM", any case) or number ("15");
/// ValueError naming it otherwise.
int parse_signal(std::string_view name);

}  // namespace rex::detail
