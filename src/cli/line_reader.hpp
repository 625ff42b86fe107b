// LineReader: reads the commands of `rex shell` on a thread of its own, so the io_context keeps
// running (signals, a deployment's connections) while a person types, and typing never waits
// for the io_context.
//
// On a terminal it edits lines with libedit (emacs keys, Up/Down history kept in a file); Ctrl-C
// discards the line being typed and Ctrl-D on an empty line ends the input. Otherwise it reads
// plain lines without echo or prompt. Either way a line ending in a backslash continues on the
// next line, as in bash.
//
// Threading: read() from one coroutine at a time on the executor given; stop() and resized()
// from any thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <memory>
#include <optional>
#include <string>

namespace rex::cli {

namespace asio = boost::asio;

struct LineReaderConfig {
  bool edit = true;                 // libedit; false: plain lines
  std::string history_file{};       // empty: history is not kept across runs
  std::string continuation = "> ";  // prompt after a line ending in a backslash
  int history_size = 1000;
};

class LineReader {
 public:
  LineReader(asio::any_io_executor executor, LineReaderConfig config);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// The next command, its lines joined with newlines (backslashes kept, so bash sees the
  /// continuation). Empty at the end of the input or after stop(). Cancellable; a cancelled
  /// read leaves the line being typed to the next read.
  asio::awaitable<std::optional<std::string>> read(std::string prompt);

  /// Ends the input: a read in progress completes empty, the terminal is restored. Blocks until
  /// the reading thread has finished, which it does at once. Safe to call more than once.
  void stop();

  /// The terminal changed size (call on SIGWINCH).
  void resized();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::cli
