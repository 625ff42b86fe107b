// Compiled with the session layer's include path only: the runtime layer sits above it, so this
// include must not be found (tests/layers/CMakeLists.txt expects exactly that error).
#include <rex/runtime/runtime.hpp>
