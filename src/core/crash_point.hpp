// Crash points: named places where a process of rex can be made to die as `kill -9` would kill
// it, so that crash tests reach each step of a multi-step change (a record, then a process, then
// a second record) on purpose instead of by chance.
//
// REX_CRASH_AT=NAME[:N] in the environment arms one point: the N-th time (default the first)
// the process passes crash_point(NAME), it writes one line naming the point to stderr and sends
// itself SIGKILL. Unset (the normal case), a crash point costs a check of a static read once.
#pragma once

#include <string_view>

namespace rex::detail {

void crash_point(std::string_view name);

}  // namespace rex::detail
