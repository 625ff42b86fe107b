#!/usr/bin/env bash
# Installs what is missing, builds everything (warnings are errors), and runs the whole test
# suite: unit, integration and the benchmark smoke runs. Extra arguments go to ctest.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rex_install_packages
rex_build release
cd "$REX_ROOT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ctest --preset release -j "$(nproc)" "$@"
