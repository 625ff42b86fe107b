// Must not compile: a backend module (daytona) sees neither another module's headers nor the
// backend table above it.
#include <rex/backends/docker/docker_deployment.hpp>
