# shellcheck shell=bash
# Harbor (PyPI `harbor`, with its e2b extra) in a Python of its own, for watching what Harbor's
# `-e e2b` environment asks of an E2B-compatible server (tests/harbor). Sourced, not run:
#
#   source scripts/harbor.sh
#   rex_harbor_env                  # idempotent; then "$REX_HARBOR_BIN/harbor" ...
#   rex_harbor_rootfs               # a bookworm minbase for tests/harbor/log_server.py --root
#   rex_harbor_stub_run TASK_DIR [LOG]   # harbor run -a oracle -e e2b against the logging stub
#
# Harbor 0.25 needs Python >= 3.12 and bookworm has 3.11. tests/harbor/requirements.txt pins
# every package with the hashes of its CPython 3.13 x86_64 wheels, so the environment wants a
# CPython 3.13. It takes the first that works of: $REX_HARBOR_PYTHON (a path, or "trixie" to
# force the last way), python3.13 on PATH, pyenv's 3.13.x (present on this project's
# machines); else a Debian trixie root file system (mmdebstrap from Debian's archive: python3
# 3.13 + python3-venv, about 15 s and 175 MB) holding the venv, with $REX_HARBOR_BIN/harbor and
# .../python wrappers that run it by chroot in a mount namespace of their own in which /proc,
# /dev, /sys, /tmp, /var/tmp, /work and /root are the host's.
# Everything is kept under $REX_HARBOR_DIR (default build/harbor-env).

REX_HARBOR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REX_HARBOR_DIR="${REX_HARBOR_DIR:-$REX_HARBOR_ROOT/build/harbor-env}"
REX_HARBOR_REQUIREMENTS="$REX_HARBOR_ROOT/tests/harbor/requirements.txt"
REX_HARBOR_SPEC='harbor[e2b]==0.25.0'
REX_HARBOR_MIRROR="${REX_HARBOR_MIRROR:-http://deb.debian.org/debian}"
# What Harbor needs to stay on loopback: no telemetry, LiteLLM's bundled cost map.
export HARBOR_TELEMETRY=0 LITELLM_LOCAL_MODEL_COST_MAP=True

_rex_harbor_say() { echo "rex harbor: $*" >&2; }

# _rex_harbor_python_ok PYTHON: a CPython 3.13 with what venv and pip need.
_rex_harbor_python_ok() {
  "$1" -c 'import sys, ssl, venv, ensurepip, ctypes, sqlite3, lzma, bz2, zlib
sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1
}

# _rex_harbor_find_python: prints a host CPython 3.13 that works, or nothing.
_rex_harbor_find_python() {
  local c cands=()
  if [[ -n ${REX_HARBOR_PYTHON:-} ]]; then
    [[ $REX_HARBOR_PYTHON == trixie ]] && return 0
    cands=("$REX_HARBOR_PYTHON")
  else
    c=$(command -v python3.13 2>/dev/null) && cands+=("$c")
    local pyroot
    pyroot=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for c in $(ls -d "$pyroot"/versions/3.13.* 2>/dev/null | sort -rV); do cands+=("$c/bin/python3.13"); done
  fi
  for c in "${cands[@]}"; do
    if _rex_harbor_python_ok "$c"; then echo "$c"; return 0; fi
  done
}

# _rex_harbor_trixie: the trixie root file system with python3 (3.13) and python3-venv.
_rex_harbor_trixie() {
  local root="$REX_HARBOR_DIR/trixie"
  if [[ -f $root/.rex-ready ]]; then
    _rex_harbor_say "trixie root file system cached in $root"
    return 0
  fi
  command -v mmdebstrap >/dev/null || {
    _rex_harbor_say "installing mmdebstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
  }
  _rex_harbor_say "making a Debian trixie root file system with python3 + python3-venv in $root"
  rm -rf "$root"
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' trixie "$root" "$REX_HARBOR_MIRROR" || return 1
  # pip inside the chroot: the host's pip settings (index, certificates) and name resolution
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  [[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$root/etc/pip.conf"
  touch "$root/.rex-ready"
}

# _rex_harbor_wrappers: $REX_HARBOR_DIR/bin/{harbor,python} running the trixie venv by chroot.
_rex_harbor_wrappers() {
  local root="$REX_HARBOR_DIR/trixie" bin="$REX_HARBOR_DIR/bin" name
  mkdir -p "$bin"
  for name in harbor python; do
    cat >"$bin/$name" <<WRAP
#!/bin/bash
# Runs /opt/harbor-venv/bin/$name of $root by chroot, in the caller's directory, in a mount
# namespace of its own where /proc /dev /sys /tmp /var/tmp /work /root are the host's.
exec unshare --mount --propagation private -- /bin/bash -c '
  R=\$1; shift
  for d in /proc /dev /sys /tmp /var/tmp /work /root; do
    [[ -d \$d ]] || continue
    mkdir -p "\$R\$d" && mount --rbind "\$d" "\$R\$d"
  done
  exec chroot "\$R" /bin/sh -c "cd \"\\\$1\" 2>/dev/null || cd /; shift; exec \"\\\$@\"" - "\$PWD" /opt/harbor-venv/bin/$name "\$@"
' - "$root" "\$@"
WRAP
    chmod +x "$bin/$name"
  done
}

# rex_harbor_env: makes (or reuses) the venv with Harbor and its pinned dependencies and sets
# REX_HARBOR_BIN (where `harbor` and `python` are) and REX_HARBOR_PYTHON_EXE.
rex_harbor_env() {
  local py venv stamp want start=$SECONDS
  mkdir -p "$REX_HARBOR_DIR"
  py=$(_rex_harbor_find_python)
  if [[ -n $py ]]; then
    venv="$REX_HARBOR_DIR/venv"
    _rex_harbor_say "Python: $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
    want="host $py $(sha256sum <"$REX_HARBOR_REQUIREMENTS" | cut -c1-16)"
    stamp="$venv/.rex-stamp"
    if [[ -f $stamp && $(<"$stamp") == "$want" && -x $venv/bin/harbor ]]; then
      _rex_harbor_say "venv up to date in $venv"
    else
      _rex_harbor_say "making the venv in $venv from $REX_HARBOR_REQUIREMENTS"
      rm -rf "$venv"
      "$py" -m venv "$venv" || return 1
      "$venv/bin/python" -m pip install -q --no-deps --require-hashes --only-binary=:all: \
        -r "$REX_HARBOR_REQUIREMENTS" || return 1
      "$venv/bin/python" -m pip check >/dev/null || { "$venv/bin/python" -m pip check; return 1; }
      echo "$want" >"$stamp"
    fi
    # One place for both ways: $REX_HARBOR_DIR/bin (the trixie way's wrappers live there too).
    mkdir -p "$REX_HARBOR_DIR/bin"
    ln -sfn "$venv/bin/harbor" "$REX_HARBOR_DIR/bin/harbor"
    ln -sfn "$venv/bin/python" "$REX_HARBOR_DIR/bin/python"
    REX_HARBOR_BIN="$REX_HARBOR_DIR/bin"
    REX_HARBOR_PYTHON_EXE="$venv/bin/python"
  else
    _rex_harbor_say "no usable host CPython 3.13: using a Debian trixie root file system"
    _rex_harbor_trixie || return 1
    local root="$REX_HARBOR_DIR/trixie"
    venv="$root/opt/harbor-venv"
    want="trixie $(sha256sum <"$REX_HARBOR_REQUIREMENTS" | cut -c1-16)"
    stamp="$venv/.rex-stamp"
    mkdir -p "$root/tmp/rex-harbor"
    if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
      _rex_harbor_say "venv up to date in $venv"
    else
      _rex_harbor_say "making the venv in $venv from $REX_HARBOR_REQUIREMENTS"
      rm -rf "$venv"
      cp "$REX_HARBOR_REQUIREMENTS" "$root/tmp/rex-harbor/requirements.txt"
      # the host's certificate bundle: it has what the host trusts for PyPI, which trixie's
      # ca-certificates may not (a machine reaching PyPI through a proxy of its own); pip 25
      # (truststore) reads SSL_CERT_FILE, older pips PIP_CERT
      cp -L /etc/ssl/certs/ca-certificates.crt "$root/tmp/rex-harbor/host-ca.crt"
      PIP_CERT=/tmp/rex-harbor/host-ca.crt SSL_CERT_FILE=/tmp/rex-harbor/host-ca.crt PIP_FIND_LINKS= \
      chroot "$root" /bin/sh -c 'python3 -m venv /opt/harbor-venv &&
        /opt/harbor-venv/bin/python -m pip install -q --no-deps --require-hashes --only-binary=:all: \
          -r /tmp/rex-harbor/requirements.txt && /opt/harbor-venv/bin/python -m pip check >/dev/null' || return 1
      echo "$want" >"$stamp"
    fi
    _rex_harbor_wrappers
    REX_HARBOR_BIN="$REX_HARBOR_DIR/bin"
    REX_HARBOR_PYTHON_EXE="$REX_HARBOR_DIR/bin/python"
  fi
  export REX_HARBOR_BIN REX_HARBOR_PYTHON_EXE
  _rex_harbor_say "ready: $("$REX_HARBOR_BIN/harbor" --version 2>/dev/null | tail -1) in $REX_HARBOR_BIN ($((SECONDS - start)) s)"
}

# rex_harbor_lock: regenerates tests/harbor/requirements.txt (every package of
# harbor[e2b]==0.25.0, pinned, with the sha256 of the wheel pip picks for CPython 3.13 on
# x86_64 Linux). Needs a host CPython 3.13. For maintainers; rex_harbor_env only reads the file.
rex_harbor_lock() {
  local py tmp f name ver
  py=$(_rex_harbor_find_python)
  [[ -n $py ]] || { _rex_harbor_say "rex_harbor_lock needs a host CPython 3.13"; return 1; }
  tmp=$(mktemp -d)
  "$py" -m pip download -q --only-binary=:all: -d "$tmp/wheels" "$REX_HARBOR_SPEC" || { rm -rf "$tmp"; return 1; }
  {
    echo "# harbor[e2b]==0.25.0 and all its dependencies, for CPython 3.13 on x86_64 Linux."
    echo "# Made by rex_harbor_lock (scripts/harbor.sh); install with"
    echo "#   pip install --no-deps --require-hashes --only-binary=:all: -r tests/harbor/requirements.txt"
    for f in "$tmp"/wheels/*.whl; do
      name=$(basename "$f" | cut -d- -f1 | tr '_' '-' | tr 'A-Z' 'a-z')
      ver=$(basename "$f" | cut -d- -f2)
      echo "$name==$ver --hash=sha256:$(sha256sum "$f" | cut -d' ' -f1)"
    done | sort
  } >"$REX_HARBOR_REQUIREMENTS"
  rm -rf "$tmp"
  _rex_harbor_say "wrote $REX_HARBOR_REQUIREMENTS ($(grep -c '^[a-z]' "$REX_HARBOR_REQUIREMENTS") packages)"
}

# rex_harbor_rootfs: a bookworm minbase (what rex-test-bookworm is made of, as a directory) in
# $REX_HARBOR_DIR/bookworm-root, for `log_server.py --root`, which runs the task in copies of it.
rex_harbor_rootfs() {
  local root="$REX_HARBOR_DIR/bookworm-root"
  if [[ -f $root/.rex-ready ]]; then
    _rex_harbor_say "bookworm root file system cached in $root"
  else
    command -v mmdebstrap >/dev/null || {
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
    }
    _rex_harbor_say "making a bookworm minbase in $root"
    rm -rf "$root"
    mmdebstrap --quiet --variant=minbase --include=python3 \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' bookworm "$root" "$REX_HARBOR_MIRROR" || return 1
    touch "$root/.rex-ready"
  fi
  REX_HARBOR_ROOTFS="$root"
  export REX_HARBOR_ROOTFS
}

# rex_harbor_stub_run TASK_DIR [LOG [STUB_ARGS...]]: starts tests/harbor/log_server.py on a free
# loopback port (STUB_ARGS, e.g. --root DIR), runs `harbor run -a oracle -e e2b -p TASK_DIR`
# against it with E2B's SDK pointed there, stops the stub, and prints the trial's reward.
# The log (JSON lines) goes to LOG (default /var/tmp/harbor_calls.jsonl, replaced).
rex_harbor_stub_run() {
  local task=$1 log=${2:-/var/tmp/harbor_calls.jsonl} tmp pid port rc
  shift $(($# >= 2 ? 2 : 1))
  rex_harbor_env || return 1
  tmp=$(mktemp -d)
  rm -f "$log"
  "$REX_HARBOR_PYTHON_EXE" "$REX_HARBOR_ROOT/tests/harbor/log_server.py" --log "$log" \
    --port-file "$tmp/port" "$@" >"$tmp/stub.out" 2>&1 &
  pid=$!
  for _ in $(seq 50); do [[ -s $tmp/port ]] && break; sleep 0.1; done
  port=$(<"$tmp/port")
  _rex_harbor_say "stub (pid $pid) on 127.0.0.1:$port, log $log"
  E2B_API_KEY=e2b_rex_stub E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port" \
    "$REX_HARBOR_BIN/harbor" run -a oracle -e e2b -p "$task" -o "$tmp/jobs" -y >"$tmp/harbor.out" 2>&1
  rc=$?
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  _rex_harbor_say "harbor exited $rc; its output: $tmp/harbor.out; stub output: $tmp/stub.out"
  local result
  result=$(ls "$tmp"/jobs/*/*/result.json 2>/dev/null | head -1)
  if [[ -n $result ]]; then
    "$REX_HARBOR_PYTHON_EXE" -c 'import json,sys; r=json.load(open(sys.argv[1])); vr=r.get("verifier_result") or {}; ei=r.get("exception_info") or {}; print("reward:", (vr.get("rewards") or {}).get("reward"), "exception:", ei.get("exception_type"))' "$result"
  fi
  REX_HARBOR_LAST_JOBS="$tmp/jobs"
  return $rc
}
