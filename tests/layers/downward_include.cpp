// Compiled with the session layer's include path only: its own headers, those of the layers
// below it and their internal ones are all found.
#include <rex/core/outcome.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/session/bash_session.hpp>
#include <rex/version.hpp>

#include "core/unique_fd.hpp"
