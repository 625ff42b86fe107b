# Shared by the quick-start scripts: installs what a fresh Debian bookworm machine lacks and
# configures the build. Sourced, not run.
set -euo pipefail

REX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REX_PACKAGES=(
  build-essential cmake ninja-build ccache mold git pkg-config
  libboost1.81-all-dev libboost-json1.81-dev
  libfmt-dev libspdlog-dev libcli11-dev libarchive-dev libacl1-dev libzstd-dev liblz4-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libedit-dev
  libsqlite3-dev libyaml-cpp-dev  # the gateway: its state and its registry
  libexpat1-dev  # the XML answers of AWS's Query APIs (EC2, IAM)
  bash python3 gdb procps curl less  # curl: the gateway's curl flows; less: the pager test
  tmux vim-tiny  # the terminal tests of `rex shell` (tests/cli/test_shell_tty.py)
  busybox-static bash-static
  clang-14 libclang-rt-14-dev llvm-14  # the asan preset: libFuzzer, sanitizers, llvm-symbolizer
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev  # Modal's gRPC API
  chromium  # rex swebench's HTML report, opened as a person opens it (tests/swebench)
)

# rex_install_packages [PACKAGE...]: installs those of them (default: REX_PACKAGES) that are
# missing.
rex_install_packages() {
  local missing=() wanted=("$@")
  ((${#wanted[@]})) || wanted=("${REX_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "rex: installing ${missing[*]}"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# rex_timed WHAT COMMAND...: runs COMMAND and says how long WHAT took (first runs are long).
rex_timed() {
  local what=$1 start=$SECONDS
  shift
  "$@"
  echo "rex: $what took $((SECONDS - start)) s"
}

# rex_node: Node.js and npm, for building the gateway's web console (scripts/ui.sh), E2B's
# JavaScript SDK, Daytona's SDK and Prism, and the console's browser tests; Debian's when the
# machine has none.
rex_node() {
  command -v node >/dev/null && command -v npm >/dev/null && return 0
  rex_install_packages nodejs npm
}

# rex_ctest PRESET [CTEST ARGUMENTS...]: runs CTest on PRESET's build, then fails unless every
# test that skipped or did not run is on tests/allowed_skips.txt (tests/check_skips.py): the
# CTest tests CTest calls skipped, and the tests inside a CTest test (a whole GoogleTest binary,
# a Python script) that skipped, which report themselves to REX_SKIP_REPORT.
rex_ctest() {
  local preset=$1 dir
  shift
  dir="$REX_ROOT/build/$preset"
  rm -f "$dir/skips.tsv" "$dir/results.xml"
  local status=0
  (
    cd "$REX_ROOT"
    export REX_SKIP_REPORT="$dir/skips.tsv"
    export PYTHONPATH="$REX_ROOT/tests/support/python${PYTHONPATH:+:$PYTHONPATH}"
    export PYTEST_PLUGINS=rex_skip_report
    ctest --preset "$preset" --output-junit "$dir/results.xml" "$@"
  ) || status=$?
  if [[ -f $dir/results.xml ]]; then
    python3 "$REX_ROOT/tests/check_skips.py" --junit "$dir/results.xml" \
      --report "$dir/skips.tsv" || status=1
  else
    echo "rex: ctest wrote no results ($dir/results.xml)" >&2
    status=1
  fi
  return "$status"
}

# Each test runs once, in one build (scripts/test.sh): the tests with one of these labels in the
# release build, every other test in the asan build (ASan + UBSan). In the release build: the
# tests whose containers and pods run the static rex-server (docker, k8s), the benchmarks (they
# measure optimised code), the runtime conformance suite through the emulated clouds (the asan
# build runs the same suite against the same client and server in the integration tests, and
# the clouds' own suites; here it runs beside the asan build's compile instead of lengthening
# the asan build's test step by some 250 s), and the few tests that need a build without
# sanitizers (release-only). CMakeLists.txt's rex_release_suite builds what they need.
REX_RELEASE_TEST_LABELS='^(docker|k8s|bench|load|release-only|aws-conformance|daytona-conformance|modal-conformance)$'

# rex_check_test_split: fails, naming them, on the tests that would run in neither build
# (tests/check_split.py).
rex_check_test_split() {
  python3 "$REX_ROOT/tests/check_split.py" "$REX_ROOT/build/release" "$REX_ROOT/build/asan" \
    "$REX_RELEASE_TEST_LABELS"
}

# rex_build_in_background PRESET NICE LOG TARGET...: rex_build in a session of its own at NICE,
# for the processor time the foreground leaves (the kernel schedules a session as a group of its
# own, so the session's autogroup gets NICE too). Writes its exit status to
# build/PRESET.background when it is done and prints the session's PID (for
# rex_end_background_build).
rex_build_in_background() {
  local preset=$1 nice=$2 log=$3
  shift 3
  mkdir -p "$REX_ROOT/build"
  rm -f "$REX_ROOT/build/$preset.background"
  setsid bash -c '
    source "$1/scripts/common.sh"
    renice -n "$3" -p $$ >/dev/null
    echo "$3" >"/proc/$$/autogroup" 2>/dev/null || true
    start=$SECONDS status=0
    echo "rex: building $2 in the background"
    (rex_build "$2" "${@:4}") || status=$?
    echo "rex: the $2 build took $((SECONDS - start)) s (status $status)"
    echo "$status" >"$1/build/$2.background"' bash "$REX_ROOT" "$preset" "$nice" "$@" \
    >"$log" 2>&1 </dev/null &
  echo "$!"
}

# rex_wait_for_build PRESET PID LOG: returns when the background build of PRESET (session PID,
# log LOG) is done; fails, with the end of its log, if it failed or ended without saying.
rex_wait_for_build() {
  local file="$REX_ROOT/build/$1.background" pid=$2 log=$3
  while [[ ! -f $file ]]; do
    if ! kill -0 "$pid" 2>/dev/null && [[ ! -f $file ]]; then
      echo "rex: the background $1 build ended before it was done; the end of $log:" >&2
      tail -n 60 "$log" >&2
      return 1
    fi
    sleep 2
  done
  if [[ $(<"$file") != 0 ]]; then
    echo "rex: the $1 build failed; the end of $log:" >&2
    tail -n 60 "$log" >&2
    return 1
  fi
  grep "^rex: the $1 build took" "$log"
}

# rex_end_background_build PID: ends a background build's session, if it still runs.
rex_end_background_build() {
  kill -TERM -- "-$1" 2>/dev/null || true
}

# rex_build PRESET [TARGET...]: configure once, then build incrementally.
rex_build() {
  local preset=$1
  shift
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/rex-ccache}"
  # Relative paths in the hash. A clone in another folder still misses: debug builds hash the
  # working directory (unless -fdebug-prefix-map maps it), and the precompiled header each
  # build directory makes differs too.
  export CCACHE_BASEDIR="$REX_ROOT"
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
  cd "$REX_ROOT"
  if [[ ! -f "build/$preset/build.ninja" ]]; then
    cmake --preset "$preset" >/dev/null
  fi
  cmake --build "build/$preset" -j "$(nproc)" ${1:+--target "$@"}
}

# --- The Python environments of the test suites and benchmarks -------------------------------

REX_PYTHON_REQUIREMENTS="$REX_ROOT/tests/swerex/requirements.txt"
REX_PYTHON_ENV_LINK="$REX_ROOT/build/swerex-env"  # what CMake's tests and the benchmarks use
REX_MOTO_REQUIREMENTS="$REX_ROOT/tests/aws/requirements.txt"
REX_MOTO_ENV_LINK="$REX_ROOT/build/moto-env"  # moto's server, the AWS emulator of tests/aws
REX_MODAL_REQUIREMENTS="$REX_ROOT/tests/modal/requirements.txt"
REX_MODAL_ENV_LINK="$REX_ROOT/build/modal-env"  # Modal's Python SDK, for tests/modal
REX_SWEBENCH_REQUIREMENTS="$REX_ROOT/tests/swebench/requirements.txt"
REX_SWEBENCH_ENV_LINK="$REX_ROOT/build/swebench-env"  # SWE-bench's harness, for tests/swebench

# rex_pinned_env NAME REQUIREMENTS LINK: a virtual environment with exactly the packages of
# REQUIREMENTS, built once per version of that file under ~/.cache/rex-python/NAME-<hash> and
# linked at LINK. Never touches the system's Python.
rex_pinned_env() {
  local name=$1 requirements=$2 link=$3
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/rex-python" hash env
  hash=$( { python3 --version; cat "$requirements"; } | sha256sum | cut -c1-16)
  env="$cache/$name-$hash"
  mkdir -p "$cache" "$REX_ROOT/build"
  (
    flock 9
    # .complete is written last: a run cut off in the middle leaves an environment that is
    # built again. (In place, since venv writes its own path into the scripts it installs.)
    if [[ ! -e $env/.complete ]]; then
      echo "rex: creating the Python environment $env (once)"
      rm -rf "$env"
      python3 -m venv "$env"
      # Pinned and without resolution: the file lists every package, so nothing else comes in.
      if ! "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        -r "$requirements" || ! "$env/bin/python" -m pip check >/dev/null; then
        echo "rex: installing $requirements into $env failed" >&2
        return 1
      fi
      touch "$env/.complete"
    fi
    # Environments of earlier requirement files are of no more use.
    local old
    for old in "$cache/$name"-*; do
      [[ $old == "$env" || ! -d $old ]] || rm -rf "$old"
    done
  ) 9>"$cache/.lock" || return 1
  ln -sfn "$env" "$link"
}

# rex_python_env: SWE-ReX, mini-swe-agent, E2B's Python SDK and pytest (about 700 MB), linked at
# build/swerex-env.
rex_python_env() {
  rex_pinned_env swerex "$REX_PYTHON_REQUIREMENTS" "$REX_PYTHON_ENV_LINK"
}

# rex_moto_env: moto's stand-alone server (an AWS API emulator), linked at build/moto-env.
rex_moto_env() {
  rex_pinned_env moto "$REX_MOTO_REQUIREMENTS" "$REX_MOTO_ENV_LINK"
}

# rex_modal_env: Modal's Python SDK (the official client, and the generated gRPC code the fake
# control plane of tests/modal serves), linked at build/modal-env.
rex_modal_env() {
  rex_pinned_env modal "$REX_MODAL_REQUIREMENTS" "$REX_MODAL_ENV_LINK"
}

# rex_swebench_env: SWE-bench's harness (swebench 5.0.2 and what it imports, about 500 MB),
# linked at build/swebench-env: the reference `rex swebench` is checked against.
rex_swebench_env() {
  rex_pinned_env swebench "$REX_SWEBENCH_REQUIREMENTS" "$REX_SWEBENCH_ENV_LINK"
}

# rex_npm_env SRC DIR [NPM CI ARGUMENTS...]: SRC's package.json and package-lock.json installed
# exactly with `npm ci` into DIR, again only when one of them or Node changes. Calls made at once
# (builds in parallel) install once: the others wait on DIR.lock.
rex_npm_env() {
  local src=$1 dir=$2 hash
  shift 2
  rex_node || return 1
  hash=$( { node --version; cat "$src/package.json" "$src/package-lock.json"; } | sha256sum | cut -c1-16)
  [[ -e $dir/.complete-$hash ]] && return 0
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    [[ -e $dir/.complete-$hash ]] && exit 0
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error "$@") || exit 1
    touch "$dir/.complete-$hash"
  ) 9>"$dir.lock"
}

# rex_e2b_js_env: E2B's JavaScript SDK, as tests/gateway/e2b_js/package-lock.json pins it, in
# build/e2b-js (CMake's REX_E2B_JS) for the tests labelled e2b.
REX_E2B_JS_DIR="$REX_ROOT/build/e2b-js"
rex_e2b_js_env() {
  rex_npm_env "$REX_ROOT/tests/gateway/e2b_js" "$REX_E2B_JS_DIR"
}

# rex_ui_test_env: Playwright's library (playwright-core) and axe-core, as
# tests/ui/package-lock.json pins them, in build/ui-test-env (CMake's REX_UI_TEST_ENV) for the
# tests labelled ui, which drive Debian's chromium (REX_PACKAGES) through the gateway's web
# console. playwright-core downloads no browser; --ignore-scripts and
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD keep it so.
REX_UI_TEST_ENV_DIR="$REX_ROOT/build/ui-test-env"
rex_ui_test_env() {
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 rex_npm_env "$REX_ROOT/tests/ui" "$REX_UI_TEST_ENV_DIR" \
    --ignore-scripts
}

# rex_daytona_env: Daytona's TypeScript SDK and Stoplight Prism (an OpenAPI validator), as
# tests/daytona/package-lock.json pins them (`npm ci` into build/daytona-env, CMake's
# REX_DAYTONA_ENV), and Daytona's OpenAPI documents rebuilt from its Python API clients
# (tests/daytona/openapi-clients.txt, pinned with hashes) into build/daytona-env/openapi, for the
# tests labelled daytona; again only when one of those files, Node or the rebuilding script
# changes.
REX_DAYTONA_ENV_DIR="$REX_ROOT/build/daytona-env"
rex_daytona_env() {
  local src="$REX_ROOT/tests/daytona" dir=$REX_DAYTONA_ENV_DIR hash
  rex_node || return 1
  hash=$( { node --version; cat "$src/package.json" "$src/package-lock.json" \
    "$src/openapi-clients.txt" "$src/openapi_from_clients.py"; } | sha256sum | cut -c1-16)
  [[ -e $dir/.complete-$hash ]] && return 0
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  # --ignore-scripts: no package needs its install script (Prism's only reports the install).
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || return 1
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --require-hashes -r "$src/openapi-clients.txt" -d "$dir/wheels" || return 1
  python3 "$src/openapi_from_clients.py" "$dir"/wheels/*.whl --out "$dir/openapi" || return 1
  touch "$dir/.complete-$hash"
}

# --- A Docker engine and the test images, for the tests labelled `docker` ----------------------

REX_DOCKER_LOG=/var/log/rex-dockerd.log
REX_PODMAN_LOG=/var/log/rex-podman.log
REX_PODMAN_SOCKET=/run/podman/podman.sock  # where rex looks for root's Podman by default
REX_IMAGE_CACHE=/var/cache/rex-images
# Image settings given to `docker import`; part of every recipe's hash.
REX_IMAGE_CHANGES=(
  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  "ENV LANG=C.UTF-8"
  "WORKDIR /root"
  'CMD ["/bin/bash"]'
)
REX_DEBIAN_SOURCES=/etc/apt/sources.list.d/debian.sources

_rex_sudo() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

_rex_docker_answers() {
  timeout 10 docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1
}

_rex_podman_answers() {
  timeout 10 podman --remote --url "unix://$REX_PODMAN_SOCKET" version >/dev/null 2>&1
}

# _rex_start_service NAME LOG ANSWERS-FUNCTION COMMAND...: starts COMMAND detached unless
# ANSWERS-FUNCTION succeeds, then waits up to 60 s for it to.
_rex_start_service() {
  local name=$1 log=$2 answers=$3
  shift 3
  "$answers" && return 0
  echo "rex: starting $name (log: $log)"
  # Detached in its own session; without the lock's descriptor, or it would hold the lock.
  # The background subshell lets go of this shell's output first: it lives as long as the
  # service, and a caller reading our output through a pipe (CTest) would wait for it.
  # From /: a service that outlives this checkout must not keep a deleted directory as its
  # working directory (Podman's conmon then fails every container start).
  (
    exec </dev/null >/dev/null 2>&1 9>&-
    _rex_sudo sh -c 'log=$1; shift; cd / && exec setsid "$@" </dev/null >>"$log" 2>&1' rex "$log" "$@"
  ) &
  local waited=0
  until "$answers"; do
    if ((waited >= 60)); then
      echo "rex: $name did not answer within 60 s; the end of $log:" >&2
      tail -n 30 "$log" >&2
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

# Each recipe writes a root file system tarball to $1. The hash of the function's own text (and
# of what it reads from the host) names the result, so editing a recipe rebuilds its image.
_rex_recipe_bookworm() {
  # minbase: no systemd, no recommends; python3 and gdb are what the sandbox side needs, vi and
  # top (vim-tiny, procps) what the terminal tests of `rex shell` run.
  mmdebstrap --quiet --variant=minbase --include=python3,gdb,procps,vim-tiny --format=tar \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$1" "$REX_DEBIAN_SOURCES"
}

_rex_recipe_code_interpreter() {
  # The gateway's code-interpreter-v1 environment: Python with matplotlib, numpy and pandas for
  # E2B's code interpreter (its kernel is the gateway's, started in the sandbox), bash and procps.
  mmdebstrap --quiet --variant=minbase \
    --include=python3,python3-matplotlib,python3-numpy,python3-pandas,procps --format=tar \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$1" "$REX_DEBIAN_SOURCES"
}

_rex_recipe_nopython() {
  # busybox (every applet linked into /bin) and a static bash, nothing else: no Python, no libc.
  local root
  root=$(mktemp -d)
  mkdir -p "$root"/{bin,etc,root,tmp,proc,dev,sys}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  cp /bin/bash-static "$root/bin/bash"
  local applet
  for applet in $(/bin/busybox --list); do
    [[ $applet == busybox || $applet == bash ]] || ln -s busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$1" .
  rm -rf "$root"
}

_rex_recipe_hash() {  # RECIPE-FUNCTION
  {
    declare -f "$1"
    declare -p REX_IMAGE_CHANGES
    case $1 in
      _rex_recipe_bookworm) cat "$REX_DEBIAN_SOURCES" ;;
      _rex_recipe_nopython) dpkg-query -W busybox-static bash-static ;;
    esac
  } | sha256sum | cut -c1-16
}

# _rex_image CLI NAME RECIPE-FUNCTION: builds NAME in CLI's (docker or podman) image store unless
# it is there from the same recipe.
_rex_image() {
  local cli=$1 name=$2 recipe=$3 hash have tar
  hash=$(_rex_recipe_hash "$recipe")
  have=$("$cli" image inspect --format '{{index .Config.Labels "rex.recipe"}}' "$name" 2>/dev/null || true)
  [[ $have == "$hash" ]] && return 0
  tar="$REX_IMAGE_CACHE/$hash.tar"
  if [[ ! -s $tar ]]; then
    echo "rex: building the root file system of $name (recipe $hash)"
    local log="$REX_IMAGE_CACHE/$hash.log"
    if ! "$recipe" "$tar.part" >"$log" 2>&1; then
      echo "rex: building $name failed; the end of $log:" >&2
      tail -n 30 "$log" >&2
      rm -f "$tar.part"
      return 1
    fi
    mv "$tar.part" "$tar"
    rm -f "$log"
  fi
  echo "rex: importing $name into $cli"
  local old_id
  old_id=$("$cli" image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
  local changes=(--change "LABEL rex.recipe=$hash") change
  for change in "${REX_IMAGE_CHANGES[@]}"; do
    changes+=(--change "$change")
  done
  if ! "$cli" import "${changes[@]}" "$tar" "$name" >/dev/null 2>"$REX_IMAGE_CACHE/import.log"; then
    echo "rex: importing $name into $cli failed:" >&2
    cat "$REX_IMAGE_CACHE/import.log" >&2
    return 1
  fi
  # The previous build, now untagged (kept while a container still uses it).
  [[ -z $old_id ]] || "$cli" image rm "$old_id" >/dev/null 2>&1 || true
}

# rex_dockerd_stop: stops the running dockerd (SIGTERM, as a service manager does; it stops its
# containers) and waits until it has exited. rex_dockerd_start starts it again. For the test of
# a pool that loses its engine mid-run.
rex_dockerd_stop() {
  local pid waited=0
  pid=$(pidof dockerd || true)
  [[ -n $pid ]] || return 0
  _rex_sudo kill -TERM $pid
  # Not `kill -0`: dockerd's parent may be a PID 1 that takes seconds to reap a zombie.
  while readlink "/proc/$pid/exe" >/dev/null 2>&1; do
    if ((waited >= 60)); then
      echo "rex: dockerd ($pid) did not stop within 30 s" >&2
      return 1
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
}

rex_dockerd_start() {
  _rex_start_service dockerd "$REX_DOCKER_LOG" _rex_docker_answers dockerd
}

# rex_docker_setup: installs Docker and Podman when missing, starts dockerd and Podman's API
# service when their sockets do not answer (logs in $REX_DOCKER_LOG and $REX_PODMAN_LOG), and
# builds the test images that are missing or out of date in both image stores. Concurrent runs
# (several work trees) serialise on a lock.
rex_docker_setup() {
  local need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  command -v podman >/dev/null || need+=(podman)
  # Podman's init process (HostConfig.Init, which rex's deployments set by default).
  dpkg-query -W -f='${Status}' catatonit 2>/dev/null | grep -q "install ok installed" || need+=(catatonit)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed" || need+=(busybox-static)
  dpkg-query -W -f='${Status}' bash-static 2>/dev/null | grep -q "install ok installed" || need+=(bash-static)
  if ((${#need[@]})); then
    echo "rex: installing ${need[*]}"
    _rex_sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive _rex_sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  _rex_sudo mkdir -p "$REX_IMAGE_CACHE"
  (
    flock 9
    _rex_start_service dockerd "$REX_DOCKER_LOG" _rex_docker_answers dockerd
    _rex_sudo mkdir -p "$(dirname "$REX_PODMAN_SOCKET")"
    _rex_start_service "the Podman API service" "$REX_PODMAN_LOG" _rex_podman_answers \
      podman system service --time=0 "unix://$REX_PODMAN_SOCKET"
    local cli
    for cli in docker podman; do
      _rex_image "$cli" rex-test-nopython:latest _rex_recipe_nopython
      _rex_image "$cli" rex-test-bookworm:latest _rex_recipe_bookworm
    done
    _rex_image docker rex-code-interpreter:latest _rex_recipe_code_interpreter
    # Roots of earlier recipes are of no more use.
    local keep=("$(_rex_recipe_hash _rex_recipe_nopython).tar" "$(_rex_recipe_hash _rex_recipe_bookworm).tar"
      "$(_rex_recipe_hash _rex_recipe_code_interpreter).tar")
    local f
    for f in "$REX_IMAGE_CACHE"/*.tar; do
      [[ ! -e $f || " ${keep[*]} " == *" $(basename "$f") "* ]] || rm -f "$f"
    done
  ) 9>"$REX_IMAGE_CACHE/.lock"
}

# --- The base image of the SWE-bench test instances (tests/swebench) ---------------------------

# What the instances of tests/swebench/make_dataset.py run on: bash, git and patch for the
# harness's chain of patch commands (git apply, then `patch --fuzz`), python3 and pytest for the
# tests, procps for the `kill` the harness runs in the container when a test times out, tini for
# the instance images' entry point: the harness's `tail -f /dev/null` as PID 1 ignores the
# SIGTERM of its `docker stop --time=15`, which then waits 15 s for every instance.
_rex_recipe_swebench() {
  mmdebstrap --quiet --variant=minbase --include=git,patch,python3,python3-pytest,procps,tini \
    --format=tar \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$1" "$REX_DEBIAN_SOURCES"
}

# rex_swebench_images: rex_docker_setup, then rex-swebench-base:latest in both image stores,
# rebuilt only when its recipe changes. Its root file system is kept in a directory of its own
# under the image cache, where rex_docker_setup's clean-up of old roots does not reach.
rex_swebench_images() {
  rex_docker_setup || return 1
  (
    flock 9
    local REX_IMAGE_CACHE="$REX_IMAGE_CACHE/swebench"  # seen by _rex_image, called from here
    _rex_sudo mkdir -p "$REX_IMAGE_CACHE"
    local cli
    for cli in docker podman; do
      _rex_image "$cli" rex-swebench-base:latest _rex_recipe_swebench || return 1
    done
    local keep f
    keep="$(_rex_recipe_hash _rex_recipe_swebench).tar"
    for f in "$REX_IMAGE_CACHE"/*.tar; do
      [[ ! -e $f || $(basename "$f") == "$keep" ]] || rm -f "$f"
    done
  ) 9>"$REX_IMAGE_CACHE/.lock"
}
