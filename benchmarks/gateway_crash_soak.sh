#!/usr/bin/env bash
# gateway_crash_soak.sh [--rounds N] [--local-only] [BUILD]: the long form of the gateway's crash
# test (tests/gateway/crash_rounds.py; CI runs 12 rounds on local and 10 on docker): N rounds
# (default 200) on the local provider, then on docker, each ended by kill -9 at a random moment
# or at one of the gateway's crash points in turn, each checked for lost, duplicate, orphaned and
# resurrected sessions and for readiness within 1 s. BUILD is a build folder with `rex`
# (default build/release). The engine and the test image come from scripts/common.sh as the
# tests' do. Writes BUILD/crash-soak-{local,docker}.json; exits 1 when a round broke a promise.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

rounds=200 local_only=0
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --local-only) local_only=1 ;;
    *) break ;;
  esac
  shift
done
build=${1:-$REX_ROOT/build/release}
rex="$build/rex"
[[ -x $rex ]] || { echo "gateway_crash_soak: no $rex; build it first (cmake --build $build --target rex_cli rex_server)" >&2; exit 1; }

status=0
providers=(local)
if ((!local_only)); then
  rex_docker_setup
  providers+=(docker)
fi
for provider in "${providers[@]}"; do
  echo "== $rounds rounds on $provider"
  python3 "$REX_ROOT/tests/gateway/crash_rounds.py" "$rex" --rounds "$rounds" \
    --provider "$provider" --json "$build/crash-soak-$provider.json" || status=1
done
exit $status
