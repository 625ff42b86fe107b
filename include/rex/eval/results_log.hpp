// ResultsLog: DIR/results.jsonl, the durable record of an evaluation, one EvalResult per line.
//
// Guarantees:
// - append() returns once the line is on disk (written in one write(), then fdatasync), so a
//   crash or SIGKILL after it loses nothing.
// - Opening repairs what a kill in the middle of a write leaves: a last line without its
//   newline, or one that does not parse, is cut off (repaired_bytes() says how much), so the
//   file stays valid JSON lines. A bad line anywhere else is an error, never dropped silently.
// - An id recorded twice counts once, with its later record.
// - One process at a time: the file is locked (flock) while open; a second ResultsLog on the
//   same file fails with ResultsLogError instead of interleaving lines.
//
// Every member blocks on the file system: call it from a thread that may block.
#pragma once

#include <rex/eval/eval_result.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace rex {

class ResultsLogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ResultsLog {
 public:
  /// Opens `path`, creating it (and its directory) when missing, and reads what it holds.
  explicit ResultsLog(std::string path);
  ~ResultsLog();
  ResultsLog(const ResultsLog&) = delete;
  ResultsLog& operator=(const ResultsLog&) = delete;

  const std::string& path() const noexcept { return path_; }
  /// The record of every id recorded so far (the later one for an id recorded twice).
  const std::map<std::string, EvalResult>& records() const noexcept { return records_; }
  bool contains(const std::string& id) const { return records_.contains(id); }
  /// Bytes of a torn last line cut off when the file was opened (0: nothing to repair).
  std::size_t repaired_bytes() const noexcept { return repaired_bytes_; }

  /// Appends one record and waits until it is on disk.
  void append(const EvalResult& result);

  /// Removes the records `drop` selects (e.g. status error, to run them again), rewriting the
  /// file atomically (a new file renamed over it), one line per remaining id in the order
  /// first recorded. Returns how many were removed.
  std::size_t remove_if(const std::function<bool(const EvalResult&)>& drop);

 private:
  void load();
  void remember(EvalResult record);
  std::string path_;
  int fd_ = -1;
  std::map<std::string, EvalResult> records_;
  std::vector<std::string> order_;  // ids, in the order first recorded (rewrites keep it)
  std::size_t repaired_bytes_ = 0;
};

}  // namespace rex
