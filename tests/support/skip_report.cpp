// Linked into every GoogleTest executable: when REX_SKIP_REPORT names a file, each test that
// skips appends one line to it, "gtest<TAB>Suite.Name<TAB>the skip's message", so that a run of a
// whole binary (one CTest test, which CTest reports as passed) still shows what inside it did
// not run. tests/check_skips.py reads the file against tests/allowed_skips.txt.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  }
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

class SkipReporter : public testing::EmptyTestEventListener {
 public:
  explicit SkipReporter(std::string path) : path_(std::move(path)) {}

  void OnTestEnd(const testing::TestInfo& info) override {
    const testing::TestResult* result = info.result();
    if (result == nullptr || !result->Skipped())
      return;
    std::string why;
    for (int i = 0; i < result->total_part_count(); ++i) {
      const testing::TestPartResult& part = result->GetTestPartResult(i);
      if (part.skipped() && part.message() != nullptr)
        why += part.message();
    }
    const std::string line = "gtest\t" + std::string(info.test_suite_name()) + "." + info.name() +
                             "\t" + one_line(why) + "\n";
    // One write with O_APPEND: lines of tests running at once in other processes stay whole.
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      return;
    [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
    ::close(fd);
  }

 private:
  std::string path_;
};

// Registered before main(): the listener list exists from the start, and gtest_main's main()
// leaves it alone.
const bool registered = [] {
  const char* path = std::getenv("REX_SKIP_REPORT");
  if (path != nullptr && *path != '\0')
    testing::UnitTest::GetInstance()->listeners().Append(new SkipReporter(path));
  return true;
}();

}  // namespace
