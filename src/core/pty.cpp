#include "core/pty.hpp"

#include <rex/protocol/exceptions.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <cerrno>
#include <system_error>

namespace rex::detail {

namespace {

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

Pty open_pty(unsigned short cols, unsigned short rows) {
  Pty pty;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (pty.master.get() < 0)
    fail("cannot open a pseudo-terminal");
  if (::grantpt(pty.master.get()) != 0 || ::unlockpt(pty.master.get()) != 0)
    fail("cannot unlock the pseudo-terminal");
  char name[128];
  if (::ptsname_r(pty.master.get(), name, sizeof name) != 0)
    fail("cannot name the pseudo-terminal");
  pty.slave_path = name;
  pty.slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (pty.slave.get() < 0)
    fail("cannot open the terminal");
  set_terminal_size(pty.slave.get(), cols, rows);
  return pty;
}

void set_terminal_size(int fd, unsigned short cols, unsigned short rows) {
  winsize ws{};
  ws.ws_col = cols;
  ws.ws_row = rows;
  if (::ioctl(fd, TIOCSWINSZ, &ws) != 0)
    fail("cannot set the terminal's size");
}

void check_terminal_size(const TerminalSize& size) {
  constexpr int kLargest = 10000;
  if (size.cols < 1 || size.cols > kLargest || size.rows < 1 || size.rows > kLargest)
    throw ValueError(fmt::format("a terminal's size is 1 to {} columns and rows, not {}x{}",
                                 kLargest, size.cols, size.rows));
}

}  // namespace rex::detail
