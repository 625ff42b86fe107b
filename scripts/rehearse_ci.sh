#!/usr/bin/env bash
# rehearse_ci.sh [--clean] [--at DIR] [COMMIT]: runs .ci/run as CI does (CI=true, no standard
# input) on a fresh clone of COMMIT (default HEAD) in a new folder under /var/tmp (or in DIR/rex,
# which must not exist: a rerun at an earlier run's path finds its objects in ccache as CI's
# reruns do, CI checking out at the same path each time), and prints its step table. The log is
# kept beside the clone (rehearsal.log).
#
# --clean first makes this machine look new, as far as rex's CI can tell: it stops the local
# Kubernetes cluster, dockerd and Podman's API service, and removes every cache rex's scripts
# fill: ccache's, the pinned Python environments, pip's, npm's and Go's caches and modules, the
# Kubernetes binaries (/var/cache/rex-k8s) and the test images' root tarballs. Installed
# Debian packages stay. It is destructive: everything it removes is made again, at length, by
# the run that follows.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

clean=0 at=""
while (($#)); do
  case $1 in
    --clean) clean=1 ;;
    --at) at=$2; shift ;;
    *) break ;;
  esac
  shift
done
commit=${1:-HEAD}
if [[ -n $at && -e $at/rex ]]; then
  echo "rex: $at/rex exists; move it away first" >&2
  exit 1
fi

if ((clean)); then
  echo "rex: making this machine look new"
  bash "$REX_ROOT/scripts/k8s.sh" down || true
  rm -rf /var/cache/rex-k8s
  rex_dockerd_stop || true
  # Podman's API service: the process that listens on its socket.
  for pid in $(ss -xlpnH "src $REX_PODMAN_SOCKET" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    kill -TERM "$pid" 2>/dev/null || true
  done
  # The test images: their root tarballs, and the engines' stores that hold them (Docker's and
  # Podman's, and the cluster's containerd, under /var/lib/rex-k8s with the cluster's PKI), as a
  # newly installed engine has them: empty. The engines leave their folders bind-mounted on
  # themselves, which goes first; anything else mounted there stops the removal.
  rm -rf "$REX_IMAGE_CACHE"
  for store in /var/lib/docker /var/lib/containers/storage /var/lib/rex-k8s; do
    for target in $(findmnt -rno TARGET | grep "^$store\(/\|$\)" | sort -r); do
      if [[ $(findmnt -no SOURCE --mountpoint "$target") == *"[$target]" ]]; then
        umount "$target"
      fi
    done
    if findmnt -rno TARGET | grep -q "^$store\(/\|$\)"; then
      echo "rex: something is still mounted under $store; not removing it" >&2
      findmnt -rno TARGET | grep "^$store\(/\|$\)" >&2
      exit 1
    fi
  done
  rm -rf /var/lib/docker /var/lib/containers/storage /var/lib/rex-k8s
  rm -rf "${CCACHE_DIR:-$HOME/.cache/rex-ccache}" "$HOME/.cache/rex-python" "$HOME/.cache/pip" \
    "$HOME/.npm" "$HOME/.cache/go-build"
  if command -v go >/dev/null; then
    go clean -modcache || true
  fi
fi

if [[ -n $at ]]; then
  work=$at
  mkdir -p "$work"
else
  work=$(mktemp -d /var/tmp/rex-rehearsal.XXXXXX)
fi
git clone --quiet "$REX_ROOT" "$work/rex"
git -C "$work/rex" checkout --quiet "$commit"
echo "rex: running .ci/run on $(git -C "$work/rex" rev-parse --short HEAD) in $work/rex" \
  "(log: $work/rehearsal.log)"
status=0
(cd "$work/rex" && CI=true bash .ci/run </dev/null) >"$work/rehearsal.log" 2>&1 || status=$?
sed -n '/=== .ci\/run: step times/,$p' "$work/rehearsal.log"
grep '^rex: .* took ' "$work/rehearsal.log" || true
if ((status != 0)); then
  echo "rex: .ci/run failed ($status); the end of $work/rehearsal.log:" >&2
  tail -n 60 "$work/rehearsal.log" >&2
fi
exit "$status"
