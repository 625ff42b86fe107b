#!/usr/bin/env bash
# Installs what is missing, builds everything (warnings are errors), and runs the whole test
# suite: unit, integration, docker (against a real engine, started here when needed) and the
# benchmark smoke runs. Extra arguments go to ctest.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rex_install_packages
rex_docker_setup  # the engine and images the tests labelled `docker` use
rex_python_env    # SWE-ReX and mini-swe-agent, pinned, for the tests labelled `swerex`
rex_build release
cd "$REX_ROOT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ctest --preset release -j "$(nproc)" "$@"
