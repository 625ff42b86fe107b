#include "line_reader.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <histedit.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <cwchar>
#include <mutex>
#include <thread>

namespace rex::cli {

namespace {

using Channel =
    asio::experimental::concurrent_channel<void(boost::system::error_code, std::string)>;

// Bytes written to the wake pipe.
constexpr char wake_quit = 'q';
constexpr char wake_resize = 'r';

}  // namespace

struct LineReader::Impl {
  LineReaderConfig config;
  Channel results;
  bool awaiting = false;  // a request is out (touched by the reading coroutine only)

  std::mutex mutex;
  std::condition_variable wanted;
  std::optional<std::string> request;  // the prompt of the next line to read
  bool quit = false;
  std::thread thread;
  int wake[2] = {-1, -1};  // wakes the thread from poll(): quit or resize

  // Reader thread only.
  EditLine* el = nullptr;
  History* history = nullptr;
  std::string prompt;
  bool discard = false;  // Ctrl-C pressed: the line read is thrown away
  std::string pending;   // plain mode: bytes read past the current line
  std::mbstate_t mb{};

  Impl(asio::any_io_executor ex, LineReaderConfig c) : config(std::move(c)), results(ex, 1) {
    if (::pipe2(wake, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    // The thread takes no signals: they belong to the io_context's signal sets.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  ~Impl() {
    stop();
    ::close(wake[0]);
    ::close(wake[1]);
  }

  void stop() {
    {
      std::lock_guard lock(mutex);
      if (quit && !thread.joinable())
        return;
      quit = true;
    }
    wanted.notify_one();
    poke(wake_quit);
    if (thread.joinable())
      thread.join();
  }

  void poke(char what) {
    while (::write(wake[1], &what, 1) < 0 && errno == EINTR) {
    }
  }

  // ---- the reader thread ------------------------------------------------------------------

  void run() {
    if (config.edit)
      open_editor();
    for (;;) {
      std::string wanted_prompt;
      {
        std::unique_lock lock(mutex);
        wanted.wait(lock, [&] { return request.has_value() || quit; });
        if (quit)
          break;
        wanted_prompt = std::move(*request);
        request.reset();
      }
      std::optional<std::string> command = read_command(wanted_prompt);
      if (command)
        results.try_send(boost::system::error_code{}, std::move(*command));
      else
        results.try_send(asio::error::eof, std::string{});
    }
    if (config.edit)
      close_editor();
  }

  bool quitting() {
    std::lock_guard lock(mutex);
    return quit;
  }

  // Waits for input or a wake-up. Returns false when the thread should stop reading.
  bool wait_readable() {
    for (;;) {
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake[0], POLLIN, 0}};
      const int n = ::poll(fds, 2, -1);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        return false;
      }
      if (fds[1].revents & POLLIN) {
        char what = 0;
        if (::read(wake[0], &what, 1) == 1 && what == wake_resize) {
          if (el != nullptr)
            el_resize(el);
          continue;
        }
        return false;  // quit
      }
      if (fds[0].revents != 0)
        return true;
    }
  }

  // One byte of input: 1, 0 at the end of input or when stopping, -1 on error.
  int next_byte(char& byte) {
    if (!wait_readable())
      return 0;
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, &byte, 1);
      if (n >= 0)
        return static_cast<int>(n);
      if (errno != EINTR)
        return -1;
    }
  }

  std::optional<std::string> read_command(const std::string& first_prompt) {
    std::string command;
    std::string current = first_prompt;
    for (;;) {
      std::optional<std::string> line = config.edit ? edit_line(current) : plain_line();
      if (!line || quitting())
        return std::nullopt;
      if (discard) {  // Ctrl-C: start over
        command.clear();
        current = first_prompt;
        continue;
      }
      if (!line->empty() && line->back() == '\\') {
        command += *line + "\n";
        current = config.continuation;
        continue;
      }
      command += *line;
      break;
    }
    if (history != nullptr && command.find_first_not_of(" \t\n") != std::string::npos) {
      HistEvent event;
      ::history(history, &event, H_ENTER, command.c_str());
      if (!config.history_file.empty())
        ::history(history, &event, H_SAVE, config.history_file.c_str());
    }
    return command;
  }

  std::optional<std::string> plain_line() {
    discard = false;
    std::string line;
    for (;;) {
      const auto nl = pending.find('\n');
      if (nl != std::string::npos) {
        line += pending.substr(0, nl);
        pending.erase(0, nl + 1);
        return line;
      }
      line += pending;
      pending.clear();
      if (!wait_readable())
        return std::nullopt;
      char buffer[4096];
      ssize_t n = 0;
      do {
        n = ::read(STDIN_FILENO, buffer, sizeof buffer);
      } while (n < 0 && errno == EINTR);
      if (n <= 0)  // the end: a last line without a newline still counts
        return line.empty() ? std::nullopt : std::optional<std::string>(line);
      pending.assign(buffer, static_cast<std::size_t>(n));
    }
  }

  std::optional<std::string> edit_line(const std::string& shown) {
    prompt = shown;
    discard = false;
    // Editing mode before the prompt shows (el_gets would switch only at the first key), so a
    // key pressed as soon as the prompt appears is never taken by the terminal's normal mode.
    el_set(el, EL_PREP_TERM, 1);
    int count = 0;
    const char* text = el_gets(el, &count);
    if (text == nullptr || count < 0) {
      std::fputc('\n', stdout);  // leave the prompt's line
      std::fflush(stdout);
      return std::nullopt;
    }
    std::string line(text, static_cast<std::size_t>(count));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
      line.pop_back();
    return line;
  }

  // ---- libedit ----------------------------------------------------------------------------

  static Impl* self(EditLine* el) {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    return static_cast<Impl*>(data);
  }

  static char* prompt_of(EditLine* el) { return self(el)->prompt.data(); }

  // Reads a character as libedit's own reader would, but wakes for stop() and resizes.
  static int read_char(EditLine* el, wchar_t* out) {
    Impl* me = self(el);
    for (;;) {
      char byte = 0;
      const int n = me->next_byte(byte);
      if (n <= 0)
        return n;
      const std::size_t r = std::mbrtowc(out, &byte, 1, &me->mb);
      if (r == static_cast<std::size_t>(-2))
        continue;  // the middle of a multibyte character
      if (r == static_cast<std::size_t>(-1)) {
        me->mb = std::mbstate_t{};
        *out = static_cast<unsigned char>(byte);
      }
      return 1;
    }
  }

  // Ctrl-C at the prompt: like bash, show ^C and give a fresh prompt.
  static unsigned char on_interrupt(EditLine* el, int) {
    Impl* me = self(el);
    me->discard = true;
    const LineInfo* info = el_line(el);
    el_cursor(el, static_cast<int>(info->lastchar - info->cursor));
    std::fputs("^C\n", stdout);
    std::fflush(stdout);
    return CC_NEWLINE;
  }

  void open_editor() {
    history = history_init();
    HistEvent event;
    ::history(history, &event, H_SETSIZE, config.history_size);
    ::history(history, &event, H_SETUNIQUE, 1);
    if (!config.history_file.empty())
      ::history(history, &event, H_LOAD, config.history_file.c_str());

    el = el_init("rex", stdin, stdout, stderr);
    el_set(el, EL_CLIENTDATA, static_cast<void*>(this));
    el_set(el, EL_EDITOR, "emacs");
    el_set(el, EL_PROMPT, &Impl::prompt_of);
    el_set(el, EL_HIST, ::history, history);
    el_set(el, EL_GETCFN, &Impl::read_char);
    // Ctrl-C reaches the editor as a key while a line is edited (and stays a signal while a
    // command runs, when the terminal is back in its normal mode).
    el_set(el, EL_SETTY, "-d", "-isig", nullptr);
    // The wide form keeps the (static) strings; the narrow one copies them and never frees.
    el_wset(el, EL_ADDFN, L"rex-discard-line", L"Discard the line (Ctrl-C)", &Impl::on_interrupt);
    el_set(el, EL_BIND, "^C", "rex-discard-line", nullptr);
    el_source(el, nullptr);  // ~/.editrc, as other libedit programs do
  }

  void close_editor() {
    el_end(el);  // restores the terminal
    el = nullptr;
    history_end(history);
    history = nullptr;
  }
};

LineReader::LineReader(asio::any_io_executor executor, LineReaderConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {}

LineReader::~LineReader() = default;

asio::awaitable<std::optional<std::string>> LineReader::read(std::string prompt) {
  Impl& impl = *impl_;
  if (!impl.awaiting) {
    {
      std::lock_guard lock(impl.mutex);
      if (impl.quit)
        co_return std::nullopt;
      impl.request = std::move(prompt);
    }
    impl.wanted.notify_one();
    impl.awaiting = true;
  }
  auto [ec, line] = co_await impl.results.async_receive(asio::as_tuple(asio::use_awaitable));
  if (ec == asio::experimental::channel_errc::channel_cancelled ||
      ec == asio::error::operation_aborted)
    co_return std::nullopt;  // cancelled: the request stays out for the next read
  impl.awaiting = false;
  if (ec)
    co_return std::nullopt;
  co_return std::move(line);
}

void LineReader::stop() {
  impl_->stop();
}

void LineReader::resized() {
  impl_->poke(wake_resize);
}

}  // namespace rex::cli
