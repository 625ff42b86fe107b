#!/usr/bin/env bash
# Installs what is missing, builds everything (warnings are errors), and runs the whole test
# suite: unit, integration, docker (against a real engine, started here when needed), k8s
# (against a local cluster, started here when needed) and the benchmark smoke runs. Extra
# arguments go to ctest.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rex_timed "installing packages" rex_install_packages
# The engine and images the tests labelled `docker` use.
rex_timed "the container engines and test images" rex_docker_setup
# SWE-ReX and mini-swe-agent, pinned, for the tests labelled `swerex`.
rex_timed "the SWE-ReX environment" rex_python_env
# moto's server, pinned, for the tests labelled aws.
rex_timed "the AWS emulator" rex_moto_env
# Modal's Python SDK, pinned, for the fake Modal control plane and its client check (tests/modal).
rex_timed "the Modal SDK" rex_modal_env
# E2B's JavaScript SDK, pinned, for the tests labelled e2b.
rex_timed "E2B's JavaScript SDK" rex_e2b_js_env
# Daytona's TypeScript SDK, Prism and Daytona's OpenAPI documents, for the tests labelled daytona.
rex_timed "Daytona's SDK and OpenAPI documents" rex_daytona_env
# A single-node Kubernetes (built once from pinned Go modules, cached), for the tests labelled
# k8s.
source "$REX_ROOT/scripts/k8s.sh"
rex_timed "the Kubernetes cluster" rex_k8s_setup
rex_timed "building" rex_build release
cd "$REX_ROOT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
rex_timed "the tests" ctest --preset release -j "$(nproc)" "$@"
