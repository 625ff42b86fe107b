#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite, each test once, in the build
# that tells most about it:
# - the asan build (clang 14, ASan + UBSan): the unit and integration tests, the examples, the
#   emulated clouds' suites, SWE-ReX's and E2B's clients against rex, the fuzz targets from their
#   corpora;
# - the release build: the tests labelled docker and k8s (against a real engine and a local
#   cluster, started here when needed; their containers and pods run the static rex-server,
#   which a sanitized build cannot make), the benchmarks' smoke runs, the runtime conformance
#   suite through the emulated clouds, and the few tests that need a build without sanitizers
#   (label release-only).
# REX_RELEASE_TEST_LABELS (scripts/common.sh) draws the line; a test that would run in neither
# fails the run (tests/check_split.py), and so does a test that skipped, unless
# tests/allowed_skips.txt allows it. Extra arguments go to both ctest runs.
#
# The test environments (engines and images, Python environments, Node packages, the Kubernetes
# cluster) are made while the release build runs: most of their time is downloads, which leave
# the processors to the compiler. The asan build runs in the background from the end of the release
# build, beside what is left of the environments and the release build's tests (which wait on
# containers and pods more than they compute).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$REX_ROOT/scripts/k8s.sh"
source "$REX_ROOT/scripts/harbor.sh"
rex_timed "installing packages" rex_install_packages "${REX_PACKAGES[@]}" "${REX_K8S_PACKAGES[@]}"
rex_node  # before any build: the gateway's console is built with npm (scripts/ui.sh)

# rex_test_environments: everything the tests use beyond the build, one after the other (the
# steps that install Debian packages must not run at once).
rex_test_environments() {
  # The engine and images the tests labelled `docker` use.
  rex_timed "the container engines and test images" rex_docker_setup
  # The base image of the SWE-bench test dataset's instances, for the tests labelled docker that
  # run `rex swebench`.
  rex_timed "SWE-bench's test image" rex_swebench_images
  # SWE-ReX and mini-swe-agent, pinned, for the tests labelled `swerex`.
  rex_timed "the SWE-ReX environment" rex_python_env
  # moto's server, pinned, for the tests labelled aws.
  rex_timed "the AWS emulator" rex_moto_env
  # Modal's Python SDK, pinned, for the fake Modal control plane and its client check.
  rex_timed "the Modal SDK" rex_modal_env
  # SWE-bench's harness, pinned, the reference for the tests labelled swebench.
  rex_timed "SWE-bench's harness" rex_swebench_env
  # Node.js, and E2B's JavaScript SDK, pinned, for the tests labelled e2b.
  rex_timed "E2B's JavaScript SDK" rex_e2b_js_env
  # Playwright's library and axe-core, pinned, for the tests labelled ui (the web console in
  # Debian's chromium).
  rex_timed "Playwright and axe-core" rex_ui_test_env
  # Harbor, pinned, in a Python 3.13 of its own, for the test labelled harbor.
  rex_timed "Harbor" rex_harbor_env
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
rex_timed "the release build" rex_build release rex_release_suite || build_status=$?
if ((build_status == 0)); then
  # Beside the environments still being made, and the release build's tests.
  asan_log="$REX_ROOT/build/asan-build.log"
  echo "rex: building asan in the background (log: $asan_log)"
  asan_build=$(rex_build_in_background asan 10 "$asan_log")
  trap 'rex_end_background_build "$asan_build"' EXIT
fi
environments_status=0
wait "$environments" || environments_status=$?
grep '^rex: .* took ' "$environments_log" || true
if ((environments_status != 0)); then
  echo "rex: making the test environments failed; the end of $environments_log:" >&2
  tail -n 40 "$environments_log" >&2
  exit 1
fi
((build_status == 0)) || exit "$build_status"
echo "rex: the release build and the test environments took $((SECONDS - start)) s"

cd "$REX_ROOT"
# What an earlier run on this machine left (a run stopped half-way, or one whose test failed):
# the sandboxes of rex processes that are gone. This run's own leftovers are what
# docker.no_leftovers and its kin look for, so they must not be an earlier run's.
rex_remove_leftovers() {
  build/release/rex gc --docker
  build/release/rex gc --podman
  build/release/rex gc --kubernetes --kubeconfig "$REX_KUBECONFIG"
}
rex_timed "removing what earlier runs left" rex_remove_leftovers
# The images of templates are a gateway's to keep, so they are not removed above; the test
# that looks for leftovers counts only those made from now on (tests/docker/test_leftovers.cpp).
REX_TESTS_STARTED=$(date +%s)
export REX_TESTS_STARTED
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# Two tests per processor: most of a test's time is spent waiting (on its processes, servers,
# containers, pods and timers). Fails on any test that skipped or did not run unless
# tests/allowed_skips.txt allows it.
rex_timed "the release build's tests" \
  rex_ctest release -j "$((2 * $(nproc)))" -L "$REX_RELEASE_TEST_LABELS" "$@"
rex_timed "the rest of the asan build" rex_wait_for_build asan "$asan_build" "$asan_log"
rex_check_test_split
rex_timed "the asan build's tests (every other label)" \
  rex_ctest asan -j "$((2 * $(nproc)))" -LE "$REX_RELEASE_TEST_LABELS" "$@"
