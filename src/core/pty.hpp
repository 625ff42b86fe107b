// Pseudo-terminals for sessions and terminal processes. Internal to the library.
#pragma once

#include <rex/protocol/processes.hpp>

#include "core/unique_fd.hpp"

#include <string>

namespace rex::detail {

struct Pty {
  UniqueFd master;         // close-on-exec, blocking (the caller chooses)
  UniqueFd slave;          // open, close-on-exec: for setting modes before a child opens it
  std::string slave_path;  // what a child opens as its controlling terminal
};

/// A new pseudo-terminal of `cols` x `rows` cells. std::system_error naming the step that
/// failed (no pty left, no /dev/pts).
Pty open_pty(unsigned short cols, unsigned short rows);

/// Sets a terminal's size (the kernel signals SIGWINCH to its foreground process group).
/// std::system_error when the descriptor is not a terminal.
void set_terminal_size(int fd, unsigned short cols, unsigned short rows);

/// ValueError (the protocol's) for a size no terminal has: 1 to 10000 columns and rows.
void check_terminal_size(const TerminalSize& size);

}  // namespace rex::detail
