#!/usr/bin/env bash
# Installs what is missing, builds rex, and runs a few commands in a local bash session
# (the embedded default): shell state, an exit code, and an interactive python3.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rex_timed "installing packages" rex_install_packages
rex_node  # the gateway's web console is built with npm (scripts/ui.sh)
rex_timed "building" rex_build release rex_cli
exec "$REX_ROOT/build/release/rex" run --demo "$@"
