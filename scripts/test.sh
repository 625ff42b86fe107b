#!/usr/bin/env bash
# Installs what is missing, builds everything (warnings are errors), and runs the whole test
# suite: unit, integration, docker (against a real engine, started here when needed), k8s
# (against a local cluster, started here when needed) and the benchmark smoke runs. A test that
# skipped fails the run unless tests/allowed_skips.txt allows it. Extra arguments go to ctest.
#
# The test environments (engines and images, Python environments, Node packages, the Kubernetes
# cluster) are made while the build runs: most of their time is downloads, which leave the
# processors to the compiler.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$REX_ROOT/scripts/k8s.sh"
rex_timed "installing packages" rex_install_packages "${REX_PACKAGES[@]}" "${REX_K8S_PACKAGES[@]}"

# rex_test_environments: everything the tests use beyond the build, one after the other (the
# steps that install Debian packages must not run at once).
rex_test_environments() {
  # The engine and images the tests labelled `docker` use.
  rex_timed "the container engines and test images" rex_docker_setup
  # SWE-ReX and mini-swe-agent, pinned, for the tests labelled `swerex`.
  rex_timed "the SWE-ReX environment" rex_python_env
  # moto's server, pinned, for the tests labelled aws.
  rex_timed "the AWS emulator" rex_moto_env
  # Modal's Python SDK, pinned, for the fake Modal control plane and its client check.
  rex_timed "the Modal SDK" rex_modal_env
  # Node.js, and E2B's JavaScript SDK, pinned, for the tests labelled e2b.
  rex_timed "E2B's JavaScript SDK" rex_e2b_js_env
  # Daytona's TypeScript SDK, Prism and Daytona's OpenAPI documents, for the tests labelled
  # daytona.
  rex_timed "Daytona's SDK and OpenAPI documents" rex_daytona_env
  # A single-node Kubernetes (built once from pinned Go modules, cached), for the tests labelled
  # k8s.
  rex_timed "the Kubernetes cluster" rex_k8s_setup
}

mkdir -p "$REX_ROOT/build"
environments_log="$REX_ROOT/build/test-environments.log"
echo "rex: making the test environments while building (log: $environments_log)"
start=$SECONDS
(rex_test_environments) >"$environments_log" 2>&1 &
environments=$!
build_status=0
rex_timed "building" rex_build release || build_status=$?
environments_status=0
wait "$environments" || environments_status=$?
grep '^rex: .* took ' "$environments_log" || true
if ((environments_status != 0)); then
  echo "rex: making the test environments failed; the end of $environments_log:" >&2
  tail -n 40 "$environments_log" >&2
  exit 1
fi
((build_status == 0)) || exit "$build_status"
echo "rex: the build and the test environments took $((SECONDS - start)) s"

cd "$REX_ROOT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# Two tests per processor: most of a test's time is spent waiting (on its processes, servers,
# containers, pods and timers), and the whole suite kept two processors a third busy at one test
# per processor. Fails on any test that skipped or did not run unless tests/allowed_skips.txt
# allows it.
rex_timed "the tests" rex_ctest release -j "$((2 * $(nproc)))" "$@"
