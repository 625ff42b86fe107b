# Shared by the quick-start scripts: installs what a fresh Debian bookworm machine lacks and
# configures the build. Sourced, not run.
set -euo pipefail

REX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REX_PACKAGES=(
  build-essential cmake ninja-build ccache git pkg-config
  libboost1.81-all-dev libboost-json1.81-dev
  libfmt-dev libspdlog-dev libcli11-dev libarchive-dev libacl1-dev libzstd-dev liblz4-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libedit-dev
  bash python3 gdb procps
  busybox-static bash-static
)

rex_install_packages() {
  local missing=()
  for p in "${REX_PACKAGES[@]}"; do
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

# rex_build PRESET [TARGET...]: configure once, then build incrementally.
rex_build() {
  local preset=$1
  shift
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/rex-ccache}"
  export CCACHE_BASEDIR="$REX_ROOT"  # fresh clones in other folders still hit the cache
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
  cd "$REX_ROOT"
  if [[ ! -f "build/$preset/build.ninja" ]]; then
    cmake --preset "$preset" >/dev/null
  fi
  cmake --build "build/$preset" -j "$(nproc)" ${1:+--target "$@"}
}
