#!/usr/bin/env bash
# A single-node Kubernetes on this machine, for the tests labelled `k8s`: Kubernetes v1.34.4 and
# etcd v3.6.5 built from the Go module proxy (once, cached in /var/cache/rex-k8s), Debian's
# containerd, runc and CNI plugins, and two images made here (our own pause, busybox with httpd),
# so nothing is pulled from a registry. Everything listens on 127.0.0.1 except the kubelet, which
# listens on 10.250.0.1, a /32 on an empty bridge that only this machine can reach.
#
# Sourced (`source scripts/k8s.sh`: rex_k8s_setup, rex_k8s_stop, rex_k8s_status) or run
# (`scripts/k8s.sh up|down|status|env`, `server-image BINARY TAG`: rex-server's image for the
# pods' init container; `docker-image NAME`: an image of the local Docker engine, copied). Needs root (runs itself through sudo otherwise).
# State lives in /var/lib/rex-k8s: pki/ (the CA tests sign client certificates with),
# admin.kubeconfig, config/, logs/ and run/ (PID files, etcd data, the kubelet's root), which
# `down` removes along with /run/rex-k8s; the PKI, the logs and containerd's image store stay.
set -euo pipefail

REX_K8S_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
source "$(dirname "$REX_K8S_SCRIPT")/common.sh"  # rex_install_packages
REX_K8S_FILES="$(dirname "$REX_K8S_SCRIPT")/k8s"  # pause.c, mkimage.py

REX_K8S_VERSION=v1.34.4
REX_K8S_STAGING_VERSION=v0.34.4  # k8s.io/api, client-go... are tagged v0.<minor>.<patch>
REX_ETCD_VERSION=v3.6.5          # kubeadm 1.34's default
REX_K8S_CACHE=${REX_K8S_CACHE:-/var/cache/rex-k8s}
REX_K8S_BIN="$REX_K8S_CACHE/$REX_K8S_VERSION/bin"
REX_ETCD_BIN="$REX_K8S_CACHE/etcd-$REX_ETCD_VERSION/bin"

REX_K8S_STATE=/var/lib/rex-k8s
REX_K8S_PKI="$REX_K8S_STATE/pki"
REX_K8S_CONF="$REX_K8S_STATE/config"
REX_K8S_LOGS="$REX_K8S_STATE/logs"
REX_K8S_LIFE="$REX_K8S_STATE/run"  # one cluster's life: PID files, etcd data, kubelet root
REX_K8S_RUN=/run/rex-k8s
REX_K8S_SOCK="$REX_K8S_RUN/containerd.sock"
REX_K8S_ADMIN="$REX_K8S_STATE/admin.kubeconfig"
export REX_KUBECONFIG="$REX_K8S_ADMIN"

REX_K8S_API=https://127.0.0.1:16443
REX_K8S_ETCD=http://127.0.0.1:23790
REX_K8S_NODE=rex-node
# The kubelet refuses a loopback node IP, and the apiserver reaches the kubelet (logs, exec,
# port-forward) at the node's address: a local-only /32 on an empty bridge (this kernel has no
# `dummy` link type).
REX_K8S_NODE_IP=10.250.0.1
REX_K8S_NODE_LINK=rexnode0
REX_K8S_POD_BRIDGE=rexbr0
REX_K8S_PAUSE_IMAGE=rex.local/pause:3.10
REX_K8S_BUSYBOX_IMAGE=rex.local/busybox:1.35

REX_K8S_PACKAGES=(containerd runc containernetworking-plugins busybox-static openssl iproute2
  gcc libc6-dev curl python3 util-linux)

# _rex_k8s_timed WHAT COMMAND...: rex_timed with hundredths; most of these steps take < 1 s.
_rex_k8s_timed() {
  local what=$1 start end
  shift
  start=$(date +%s%N)
  "$@"
  end=$(date +%s%N)
  printf 'rex: k8s: %s took %d.%02d s\n' "$what" $(((end - start) / 1000000000)) \
    $(((end - start) / 10000000 % 100))
}

_rex_k8s_kubectl() {
  "$REX_K8S_BIN/kubectl" --kubeconfig "$REX_K8S_ADMIN" "$@"
}

_rex_k8s_ctr() {
  ctr --address "$REX_K8S_SOCK" --namespace k8s.io "$@"
}

# --- Debian packages and the binaries ---------------------------------------------------------

_rex_k8s_packages() {
  # (Debian's containerd starts a service of its own where an init system runs; ours is another.)
  rex_install_packages "${REX_K8S_PACKAGES[@]}"
}

_rex_k8s_need_go() {
  command -v go >/dev/null && return 0
  echo "rex: k8s: Go (1.24 or newer) is needed to build $1 into $REX_K8S_CACHE; install it or" \
    "copy the binaries there" >&2
  return 1
}

# _rex_k8s_go_build OUT PACKAGE LDFLAGS [GCFLAGS...]: builds into a temporary name first, so a
# build cut off never leaves a half binary under the name the next run trusts. The compiler's
# garbage collector runs a quarter as often (GOGC=400): a fifth less processor time for a fifth
# more memory (k8s.io/client-go from nothing: 178 against 222 processor-seconds, 0.77 against
# 0.66 GB at most).
_rex_k8s_go_build() {
  local out=$1 pkg=$2 ldflags=$3
  shift 3
  CGO_ENABLED=0 GOGC=400 nice -n 10 go build -trimpath -buildvcs=false -ldflags "$ldflags" \
    "$@" -o "$out.part" "$pkg"
  mv "$out.part" "$out"
}

# The Kubernetes binaries are compiled without the optimiser and without inlining, all but Go's
# standard library (the runtime, its garbage collector, TLS and JSON stay optimised): the cluster
# is a test fixture that is idle most of the time, and its build is the largest single cost of a
# clean CI run.
REX_K8S_GCFLAGS=(-gcflags="all=-N -l" -gcflags="std=")

# The kubernetes module cannot be built at a version directly: its go.mod replaces the 31
# staging modules (k8s.io/api, client-go...) by ./staging directories. A wrapper module requires
# it and points each of those at its published v0.x release, listed from kubernetes' own go.mod.
_rex_k8s_build_kubernetes() {
  local names=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl) missing=() n
  for n in "${names[@]}"; do
    [[ -x $REX_K8S_BIN/$n ]] || missing+=("$n")
  done
  ((${#missing[@]})) || return 0
  _rex_k8s_need_go "${missing[*]}"
  mkdir -p "$REX_K8S_BIN"
  local src
  src=$(mktemp -d "$REX_K8S_CACHE/build-kubernetes.XXXXXX")
  (
    trap 'rm -rf "$src"' EXIT
    cd "$src"
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$REX_K8S_VERSION" |
      sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [[ -f $gomod ]] || { echo "rex: k8s: go mod download k8s.io/kubernetes@$REX_K8S_VERSION gave no go.mod" >&2; exit 1; }
    local staging
    staging=$(sed -nE 's#^[[:space:]]*(k8s\.io/[^[:space:]]+) => \./staging/.*#\1#p' "$gomod")
    if [[ -z $staging ]]; then
      echo "rex: k8s: found no staging replace directives in $gomod" >&2
      exit 1
    fi
    {
      echo "module rex/k8swrap"
      echo
      # Its go and godebug lines too: a dependency's godebug does not apply to the main module.
      grep -E '^(go|godebug) ' "$gomod"
      echo
      echo "require k8s.io/kubernetes $REX_K8S_VERSION"
      echo
      echo "replace ("
      for n in $staging; do
        echo "	$n => $n $REX_K8S_STAGING_VERSION"
      done
      echo ")"
    } >go.mod
    printf '//go:build tools\n\npackage tools\n\nimport (\n' >tools.go
    for n in "${names[@]}"; do
      printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$n" >>tools.go
    done
    echo ")" >>tools.go
    echo "rex: k8s: wrapper module with $(wc -w <<<"$staging") staging replacements; go mod tidy"
    nice -n 10 go mod tidy
    # Without the version stamps the binaries say v0.0.0-master+$Format:%H$, and so does the
    # node's VERSION column.
    local ldflags="-s -w" p
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $p.gitVersion=$REX_K8S_VERSION -X $p.gitMajor=$(cut -d. -f1 <<<"${REX_K8S_VERSION#v}")"
      ldflags+=" -X $p.gitMinor=$(cut -d. -f2 <<<"$REX_K8S_VERSION") -X $p.gitTreeState=clean"
      ldflags+=" -X $p.buildDate=2026-01-01T00:00:00Z -X $p.gitCommit=0000000000000000000000000000000000000000"
    done
    echo "rex: k8s: building ${missing[*]} (from nothing: about 1,060 processor-seconds, 1.9 GB" \
      "of memory, 3.3 GB of Go build cache, 0.9 GB of modules)"
    for n in "${missing[@]}"; do
      _rex_k8s_timed "building $n" _rex_k8s_go_build "$REX_K8S_BIN/$n" "k8s.io/kubernetes/cmd/$n" \
        "$ldflags" "${REX_K8S_GCFLAGS[@]}"
    done
  )
}

# etcd's server module has relative replace directives as well: the same wrapper trick.
_rex_k8s_build_etcd() {
  [[ -x $REX_ETCD_BIN/etcd ]] && return 0
  _rex_k8s_need_go "etcd $REX_ETCD_VERSION"
  mkdir -p "$REX_ETCD_BIN"
  local src
  src=$(mktemp -d "$REX_K8S_CACHE/build-etcd.XXXXXX")
  (
    trap 'rm -rf "$src"' EXIT
    cd "$src"
    printf 'module rex/etcdwrap\n\ngo 1.24.0\n' >go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
    nice -n 10 go get "go.etcd.io/etcd/server/v3@$REX_ETCD_VERSION"
    nice -n 10 go mod tidy
    _rex_k8s_timed "building etcd" _rex_k8s_go_build "$REX_ETCD_BIN/etcd" go.etcd.io/etcd/server/v3 "-s -w"
  )
}

# --- PKI and configuration --------------------------------------------------------------------

# _rex_k8s_kubeconfig DIR NAME USER: a kubeconfig with the certificate data embedded, so the file
# alone is enough (tests copy it around).
_rex_k8s_kubeconfig() {
  local dir=$1 name=$2 user=$3
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rex
  cluster:
    server: $REX_K8S_API
    certificate-authority-data: $(base64 -w0 "$dir/ca.crt")
users:
- name: "$user"
  user:
    client-certificate-data: $(base64 -w0 "$dir/$name.crt")
    client-key-data: $(base64 -w0 "$dir/$name.key")
contexts:
- name: rex
  context: {cluster: rex, user: "$user"}
current-context: rex
EOF
}

# _rex_k8s_cert DIR NAME SUBJECT EXTENSIONS: a key and a certificate signed by DIR's CA.
_rex_k8s_cert() {
  local dir=$1 name=$2 subject=$3 ext=$4
  openssl genrsa -out "$dir/$name.key" 2048 2>/dev/null
  openssl req -new -key "$dir/$name.key" -subj "$subject" -out "$dir/$name.csr"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext" \
    >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 3650 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

# Once per state directory: made aside and moved into place, so it is whole or absent.
_rex_k8s_pki() {
  if [[ ! -f $REX_K8S_PKI/ca.crt ]]; then
    local dir
    rm -rf "$REX_K8S_PKI.part"
    dir="$REX_K8S_PKI.part"
    mkdir -p "$dir"
    openssl genrsa -out "$dir/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=rex-k8s-ca" -days 3650 -out "$dir/ca.crt" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
    # 10.96.0.1 is the `kubernetes` Service's address, the first of the service range.
    _rex_k8s_cert "$dir" apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:$REX_K8S_NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    _rex_k8s_cert "$dir" kubelet "/CN=$REX_K8S_NODE" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$REX_K8S_NODE_IP,DNS:localhost,DNS:$REX_K8S_NODE"
    local client=(
      "admin /CN=admin/O=system:masters admin"
      "controller-manager /CN=system:kube-controller-manager system:kube-controller-manager"
      "scheduler /CN=system:kube-scheduler system:kube-scheduler"
      "node /CN=system:node:$REX_K8S_NODE/O=system:nodes system:node:$REX_K8S_NODE"
      "apiserver-kubelet-client /CN=kube-apiserver-kubelet-client/O=system:masters -"
    ) c name subject user
    for c in "${client[@]}"; do
      read -r name subject user <<<"$c"
      _rex_k8s_cert "$dir" "$name" "$subject" "extendedKeyUsage=clientAuth"
      [[ $user == - ]] || _rex_k8s_kubeconfig "$dir" "$name" "$user" >"$dir/$name.kubeconfig"
    done
    openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
    openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
    chmod 600 "$dir"/*.key "$dir"/*.kubeconfig
    mv "$dir" "$REX_K8S_PKI"
  fi
  [[ -f $REX_K8S_ADMIN ]] || install -m 600 "$REX_K8S_PKI/admin.kubeconfig" "$REX_K8S_ADMIN"
}

# Written on every `up` (the same bytes each time), read at each component's start.
_rex_k8s_configs() {
  mkdir -p "$REX_K8S_CONF/cni"
  cat >"$REX_K8S_CONF/containerd.toml" <<EOF
# Generated by scripts/k8s.sh: a containerd of its own, beside any other on this machine.
version = 2
root = "$REX_K8S_STATE/containerd"
state = "$REX_K8S_RUN/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt"]
[grpc]
  address = "$REX_K8S_SOCK"
[ttrpc]
  address = "$REX_K8S_SOCK.ttrpc"
[debug]
  address = "$REX_K8S_RUN/containerd-debug.sock"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$REX_K8S_PAUSE_IMAGE"
  enable_selinux = false
  # Pods' network namespaces under our state directory, not in the host's /run/netns.
  netns_mounts_under_state_dir = true
  # Without CAP_SYS_RESOURCE (this VM) runc cannot give a sandbox its oom_score_adj of -998:
  # "can't get final child's PID from pipe: EOF". Clamp to containerd's own score instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$REX_K8S_CONF/cni"
EOF
  # The bridge plugin alone, without masquerade: CNI adds no iptables rules.
  cat >"$REX_K8S_CONF/cni/10-rex-bridge.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "rex-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$REX_K8S_POD_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$REX_K8S_LIFE/cni-ipam",
        "ranges": [[{"subnet": "10.244.0.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
  cat >"$REX_K8S_CONF/kubelet.yaml" <<EOF
# Generated by scripts/k8s.sh.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $REX_K8S_NODE_IP
port: 20250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 20248
tlsCertFile: $REX_K8S_PKI/kubelet.crt
tlsPrivateKeyFile: $REX_K8S_PKI/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $REX_K8S_PKI/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$REX_K8S_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $REX_K8S_LIFE/pod-logs
volumePluginDir: $REX_K8S_LIFE/kubelet-plugins/volume/exec
serializeImagePulls: false
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%", imagefs.inodesFree: "1%"}
maxPods: 20
# Otherwise the kubelet adds KUBE-FIREWALL, KUBE-KUBELET-CANARY and KUBE-IPTABLES-HINT to the
# host's iptables.
makeIPTablesUtilChains: false
registerNode: true
EOF
}

# --- Processes --------------------------------------------------------------------------------

# _rex_k8s_pid NAME: the PID in NAME's PID file if that process still runs NAME's binary (a PID
# file that survived a reboot may name someone else's process by now).
_rex_k8s_pid() {
  local file="$REX_K8S_LIFE/$1.pid" pid exe
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ -f $REX_K8S_LIFE/$1.exe && $exe == "$(<"$REX_K8S_LIFE/$1.exe")" ]] || return 1
  echo "$pid"
}

# _rex_k8s_start NAME COMMAND...: starts COMMAND detached in its own session with its output in
# logs/NAME.log and its PID in run/NAME.pid.
_rex_k8s_start() {
  local name=$1 log="$REX_K8S_LOGS/$1.log" pidfile="$REX_K8S_LIFE/$1.pid"
  shift
  mkdir -p "$REX_K8S_LOGS" "$REX_K8S_LIFE"
  rm -f "$pidfile"
  readlink -f "$1" >"$REX_K8S_LIFE/$name.exe"
  echo "rex: k8s: starting $name (log: $log)"
  # sh writes its own PID and becomes COMMAND, so the file names COMMAND whether or not setsid
  # had to fork. From /, without our lock's descriptor, and letting go of our output (a caller
  # reading it through a pipe would wait for the service otherwise).
  (
    cd /
    exec </dev/null >"$log" 2>&1 9>&-
    setsid -f sh -c 'echo $$ >"$0.part" && mv "$0.part" "$0" && exec "$@"' "$pidfile" "$@"
  )
  local tries=0
  until [[ -s $pidfile ]]; do
    ((++tries < 50)) || { echo "rex: k8s: $name wrote no PID file" >&2; return 1; }
    sleep 0.1
  done
}

# _rex_k8s_wait NAME SECONDS CHECK...: waits until CHECK succeeds; fails with the end of NAME's
# log when NAME exits or the time is up.
_rex_k8s_wait() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ! _rex_k8s_pid "$name" >/dev/null; then
      echo "rex: k8s: $name exited; the end of $REX_K8S_LOGS/$name.log:" >&2
      tail -n 30 "$REX_K8S_LOGS/$name.log" >&2
      return 1
    fi
    if ((SECONDS - start >= limit)); then
      echo "rex: k8s: $name did not come up within $limit s; the end of $REX_K8S_LOGS/$name.log:" >&2
      tail -n 30 "$REX_K8S_LOGS/$name.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

# _rex_k8s_stop_pid NAME: SIGTERM, up to 20 s, then SIGKILL.
_rex_k8s_stop_pid() {
  local name=$1 pid waited=0
  if pid=$(_rex_k8s_pid "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    # Not `kill -0`: our services' parent is PID 1, which may take seconds to reap a zombie.
    while readlink "/proc/$pid/exe" >/dev/null 2>&1; do
      if ((waited >= 100)); then
        echo "rex: k8s: $name ($pid) ignored SIGTERM for 20 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.2
      waited=$((waited + 1))
    done
    echo "rex: k8s: stopped $name ($pid)"
  fi
  rm -f "$REX_K8S_LIFE/$name.pid" "$REX_K8S_LIFE/$name.exe"
}

_rex_k8s_etcd_healthy() { curl -sf --max-time 2 "$REX_K8S_ETCD/health" | grep -q '"health":"true"'; }
_rex_k8s_api_ready() { [[ $(_rex_k8s_kubectl --request-timeout=3s get --raw /readyz 2>/dev/null) == ok ]]; }
_rex_k8s_healthz() { curl -sfk --max-time 2 "https://127.0.0.1:$1/healthz" >/dev/null; }
_rex_k8s_cm_sched_healthy() { _rex_k8s_healthz 20257 && _rex_k8s_healthz 20259; }
_rex_k8s_containerd_answers() { _rex_k8s_ctr version >/dev/null 2>&1; }
_rex_k8s_node_ready() {
  [[ $(_rex_k8s_kubectl --request-timeout=3s get node "$REX_K8S_NODE" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}
_rex_k8s_default_sa() { _rex_k8s_kubectl --request-timeout=3s -n default get serviceaccount default; }

_rex_k8s_start_etcd() {
  _rex_k8s_pid etcd >/dev/null && return 0
  mkdir -p "$REX_K8S_LIFE/etcd"
  chmod 700 "$REX_K8S_LIFE/etcd"
  _rex_k8s_start etcd "$REX_ETCD_BIN/etcd" --name rex --data-dir "$REX_K8S_LIFE/etcd" \
    --listen-client-urls "$REX_K8S_ETCD" --advertise-client-urls "$REX_K8S_ETCD" \
    --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster rex=http://127.0.0.1:23800 --initial-cluster-state new \
    --listen-metrics-urls http://127.0.0.1:23810
  _rex_k8s_wait etcd 30 _rex_k8s_etcd_healthy
}

_rex_k8s_start_apiserver() {
  local p=$REX_K8S_PKI
  if ! _rex_k8s_pid kube-apiserver >/dev/null; then
    _rex_k8s_start kube-apiserver "$REX_K8S_BIN/kube-apiserver" \
      --bind-address=127.0.0.1 --secure-port=16443 --advertise-address=127.0.0.1 \
      --etcd-servers="$REX_K8S_ETCD" \
      --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
      --client-ca-file="$p/ca.crt" \
      --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" \
      --kubelet-client-key="$p/apiserver-kubelet-client.key" \
      --kubelet-certificate-authority="$p/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
      --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --api-audiences=https://kubernetes.default.svc.cluster.local \
      --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
      --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true --enable-bootstrap-token-auth=false
  fi
  _rex_k8s_wait kube-apiserver 60 _rex_k8s_api_ready
}

_rex_k8s_start_cm_sched() {
  local p=$REX_K8S_PKI
  if ! _rex_k8s_pid kube-controller-manager >/dev/null; then
    _rex_k8s_start kube-controller-manager "$REX_K8S_BIN/kube-controller-manager" \
      --kubeconfig="$p/controller-manager.kubeconfig" \
      --authentication-kubeconfig="$p/controller-manager.kubeconfig" \
      --authorization-kubeconfig="$p/controller-manager.kubeconfig" \
      --bind-address=127.0.0.1 --secure-port=20257 --leader-elect=false \
      --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
      --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
      --use-service-account-credentials=true --service-cluster-ip-range=10.96.0.0/16 --cluster-name=rex
  fi
  if ! _rex_k8s_pid kube-scheduler >/dev/null; then
    _rex_k8s_start kube-scheduler "$REX_K8S_BIN/kube-scheduler" \
      --kubeconfig="$p/scheduler.kubeconfig" \
      --authentication-kubeconfig="$p/scheduler.kubeconfig" \
      --authorization-kubeconfig="$p/scheduler.kubeconfig" \
      --bind-address=127.0.0.1 --secure-port=20259 --leader-elect=false
  fi
  _rex_k8s_wait kube-controller-manager 30 _rex_k8s_healthz 20257
  _rex_k8s_wait kube-scheduler 30 _rex_k8s_healthz 20259
}

_rex_k8s_start_containerd() {
  _rex_k8s_pid containerd >/dev/null && return 0
  mkdir -p "$REX_K8S_STATE/containerd" "$REX_K8S_RUN/containerd"
  _rex_k8s_start containerd "$(command -v containerd)" --config "$REX_K8S_CONF/containerd.toml"
  _rex_k8s_wait containerd 30 _rex_k8s_containerd_answers
}

# --- Images -------------------------------------------------------------------------------------

# A recipe fills ROOT and sets _rex_k8s_image_args, the image's options for mkimage.py.
_rex_k8s_recipe_pause() {  # ROOT
  gcc -Os -Wall -Wextra -Werror -static -o "$1/pause" "$REX_K8S_FILES/pause.c"
  _rex_k8s_image_args=(--entrypoint '["/pause"]')
}

_rex_k8s_recipe_busybox() {  # ROOT
  local root=$1 applet
  mkdir -p "$root"/{bin,sbin,etc,root,tmp,proc,dev,sys,www}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ $applet == busybox ]] || ln -s busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  echo "hello from rex pod" >"$root/www/index.html"
  _rex_k8s_image_args=(--cmd '["httpd", "-f", "-p", "8080", "-h", "/www"]')
}

# _rex_k8s_image NAME RECIPE: builds NAME's archive when its recipe (the function, the files it
# reads) changed, and imports it into containerd when containerd lacks this build of it.
_rex_k8s_image() {
  local name=$1 recipe=$2 dir="$REX_K8S_STATE/images" hash base
  base=${recipe#_rex_k8s_recipe_}
  hash=$( {
    declare -f "$recipe"
    cat "$REX_K8S_FILES/mkimage.py"
    case $base in
      pause) cat "$REX_K8S_FILES/pause.c"; gcc --version | head -n1 ;;
      busybox) dpkg-query -W busybox-static ;;
    esac
    echo "$name"
  } | sha256sum | cut -c1-16)
  mkdir -p "$dir"
  if [[ ! -s $dir/$base-$hash.tar ]]; then
    local root
    root=$(mktemp -d "$dir/root.XXXXXX")
    _rex_k8s_image_args=()
    "$recipe" "$root"
    python3 "$REX_K8S_FILES/mkimage.py" "$dir/$base-$hash.tar" "$name" "$root" "${_rex_k8s_image_args[@]}"
    rm -rf "$root"
    rm -f "$dir/$base"-*.imported
    local old
    for old in "$dir/$base"-*.tar; do
      [[ $old == "$dir/$base-$hash.tar" ]] || rm -f "$old"
    done
  fi
  if [[ ! -e $dir/$base-$hash.imported ]] || ! _rex_k8s_ctr images ls -q | grep -xF "$name" >/dev/null; then
    _rex_k8s_ctr images import "$dir/$base-$hash.tar" >/dev/null
    touch "$dir/$base-$hash.imported"
  fi
}

_rex_k8s_images() {
  _rex_k8s_image "$REX_K8S_PAUSE_IMAGE" _rex_k8s_recipe_pause
  _rex_k8s_image "$REX_K8S_BUSYBOX_IMAGE" _rex_k8s_recipe_busybox
}

# rex_k8s_server_image BINARY TAG: the image the sandbox pods' init container copies rex-server
# from (just the static executable at /rex-server), imported into the cluster's containerd under
# TAG. Rebuilt and imported again only when the executable changed.
rex_k8s_server_image() {
  _rex_k8s_as_root _rex_k8s_server_image "$@"
}

_rex_k8s_server_image() {
  local binary=$1 tag=$2 dir="$REX_K8S_STATE/images" hash
  [[ -x $binary ]] || { echo "rex: k8s: $binary is not an executable" >&2; return 1; }
  hash=$( { sha256sum <"$binary"; cat "$REX_K8S_FILES/mkimage.py"; echo "$tag"; } | sha256sum | cut -c1-16)
  mkdir -p "$dir"
  if [[ ! -e $dir/rex-server-$hash.imported ]] || ! _rex_k8s_ctr images ls -q | grep -xF "$tag" >/dev/null; then
    local root
    root=$(mktemp -d "$dir/root.XXXXXX")
    cp "$binary" "$root/rex-server"
    python3 "$REX_K8S_FILES/mkimage.py" "$dir/rex-server-$hash.tar" "$tag" "$root" \
      --entrypoint '["/rex-server"]'
    rm -rf "$root"
    _rex_k8s_ctr images import "$dir/rex-server-$hash.tar" >/dev/null
    rm -f "$dir/rex-server-$hash.tar" "$dir"/rex-server-*.imported
    touch "$dir/rex-server-$hash.imported"
  fi
}

# rex_k8s_docker_image NAME: copies an image of the local Docker engine into the cluster's
# containerd (under the same name), unless this build of it is there already.
rex_k8s_docker_image() {
  _rex_k8s_as_root _rex_k8s_docker_image "$@"
}

_rex_k8s_docker_image() {
  local name=$1 dir="$REX_K8S_STATE/images" id marker
  id=$(docker image inspect --format '{{.Id}}' "$name") || return 1
  marker="$dir/docker-$(echo "$name" | tr '/:' '__')-${id#sha256:}.imported"
  mkdir -p "$dir"
  if [[ ! -e $marker ]] || ! _rex_k8s_ctr images ls -q | grep -F "${name%%:*}" >/dev/null; then
    docker save "$name" | _rex_k8s_ctr images import - >/dev/null
    rm -f "$dir/docker-$(echo "$name" | tr '/:' '__')"-*.imported
    touch "$marker"
  fi
}

# --- The node -----------------------------------------------------------------------------------

_rex_k8s_node_address() {
  ip link show "$REX_K8S_NODE_LINK" >/dev/null 2>&1 || ip link add "$REX_K8S_NODE_LINK" type bridge
  ip -4 addr show dev "$REX_K8S_NODE_LINK" | grep -qF " $REX_K8S_NODE_IP/32 " ||
    ip addr add "$REX_K8S_NODE_IP/32" dev "$REX_K8S_NODE_LINK"
  ip link set "$REX_K8S_NODE_LINK" up
}

_rex_k8s_start_kubelet() {
  if ! _rex_k8s_pid kubelet >/dev/null; then
    mkdir -p "$REX_K8S_LIFE/kubelet" "$REX_K8S_LIFE/pod-logs"
    _rex_k8s_start kubelet "$REX_K8S_BIN/kubelet" --config="$REX_K8S_CONF/kubelet.yaml" \
      --kubeconfig="$REX_K8S_PKI/node.kubeconfig" \
      --root-dir="$REX_K8S_LIFE/kubelet" --cert-dir="$REX_K8S_LIFE/kubelet/pki" \
      --hostname-override="$REX_K8S_NODE" --node-ip="$REX_K8S_NODE_IP" --v=1
  fi
  _rex_k8s_wait kubelet 60 _rex_k8s_node_ready
  # Pods in `default` are refused until the controller-manager has made its service account.
  _rex_k8s_wait kube-controller-manager 60 _rex_k8s_default_sa
}

# --- Entry points -------------------------------------------------------------------------------

# _rex_k8s_as_root FUNCTION [ARG...]: runs FUNCTION here as root, or the script through sudo.
_rex_k8s_as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  else
    case $1 in
      _rex_k8s_setup) sudo bash "$REX_K8S_SCRIPT" up ;;
      _rex_k8s_stop) sudo bash "$REX_K8S_SCRIPT" down ;;
      _rex_k8s_server_image) sudo bash "$REX_K8S_SCRIPT" server-image "$2" "$3" ;;
      _rex_k8s_docker_image) sudo bash "$REX_K8S_SCRIPT" docker-image "$2" ;;
    esac
  fi
}

_rex_k8s_setup() {
  mkdir -p "$REX_K8S_STATE" "$REX_K8S_RUN"
  (
    flock 9
    _rex_k8s_timed "packages" _rex_k8s_packages
    _rex_k8s_timed "binaries (Kubernetes $REX_K8S_VERSION)" _rex_k8s_build_kubernetes
    _rex_k8s_timed "binaries (etcd $REX_ETCD_VERSION)" _rex_k8s_build_etcd
    _rex_k8s_timed "PKI" _rex_k8s_pki
    _rex_k8s_configs
    _rex_k8s_timed "etcd" _rex_k8s_start_etcd
    _rex_k8s_timed "kube-apiserver" _rex_k8s_start_apiserver
    _rex_k8s_timed "controller-manager and scheduler" _rex_k8s_start_cm_sched
    _rex_k8s_timed "containerd" _rex_k8s_start_containerd
    _rex_k8s_timed "images" _rex_k8s_images
    _rex_k8s_node_address
    _rex_k8s_timed "kubelet (node $REX_K8S_NODE Ready)" _rex_k8s_start_kubelet
  ) 9>"$REX_K8S_STATE/.lock"
}

# rex_k8s_setup: builds what is missing, starts what does not run, waits for the node to be
# Ready. Idempotent: a second call starts nothing. Sets REX_KUBECONFIG.
rex_k8s_setup() {
  _rex_k8s_timed "setup" _rex_k8s_as_root _rex_k8s_setup
  export REX_KUBECONFIG="$REX_K8S_ADMIN"
}

# _rex_k8s_shims: PIDs of the containerd-shims of OUR containerd, known by its socket in their
# command line (a shim outlives a containerd restart).
_rex_k8s_shims() {
  local dir cmd
  for dir in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$dir/cmdline") || continue
    [[ $cmd == *containerd-shim*" -address $REX_K8S_SOCK "* ]] && echo "${dir#/proc/}"
  done
  return 0
}

# _rex_k8s_unmount: what the kubelet, containerd and CNI mounted under our directories, deepest
# first (several passes for mounts stacked on one another).
_rex_k8s_unmount() {
  local pass m mounts
  for pass in 1 2 3 4 5; do
    mounts=$(findmnt -rn -o TARGET | grep -E "^($REX_K8S_STATE|$REX_K8S_RUN)(/|$)" | sort -r) || true
    [[ -n $mounts ]] || return 0
    for m in $mounts; do
      umount "$m" 2>/dev/null || ((pass < 4)) || umount -l "$m" 2>/dev/null || true
    done
  done
  if findmnt -rn -o TARGET | grep -qE "^($REX_K8S_STATE|$REX_K8S_RUN)(/|$)"; then
    echo "rex: k8s: still mounted:" >&2
    findmnt -rn -o TARGET | grep -E "^($REX_K8S_STATE|$REX_K8S_RUN)(/|$)" >&2
    return 1
  fi
}

_rex_k8s_stop() {
  mkdir -p "$REX_K8S_STATE"
  (
    flock 9
    # Nothing may bring pods back while they go: the controllers and the scheduler stop first.
    _rex_k8s_stop_pid kube-controller-manager
    _rex_k8s_stop_pid kube-scheduler
    # Pods go through the kubelet, which undoes their network, mounts and cgroups.
    # (--grace-period=0 without --force is 1 s: the kubelet still confirms each deletion.)
    if _rex_k8s_pid kubelet >/dev/null && _rex_k8s_api_ready; then
      _rex_k8s_timed "deleting pods" _rex_k8s_kubectl delete pods --all --all-namespaces \
        --grace-period=0 --wait=true --timeout=60s --ignore-not-found -o name ||
        echo "rex: k8s: some pods were not deleted in 60 s; their containers are killed below" >&2
    fi
    _rex_k8s_stop_pid kubelet
    # What the kubelet did not get to: kill the containers through containerd.
    if _rex_k8s_pid containerd >/dev/null; then
      local t c
      for t in $(_rex_k8s_ctr tasks ls -q 2>/dev/null); do
        _rex_k8s_ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
      done
      for t in $(_rex_k8s_ctr tasks ls -q 2>/dev/null); do
        _rex_k8s_ctr tasks delete -f "$t" >/dev/null 2>&1 || true
      done
      for c in $(_rex_k8s_ctr containers ls -q 2>/dev/null); do
        _rex_k8s_ctr containers delete "$c" >/dev/null 2>&1 || true
      done
    fi
    _rex_k8s_stop_pid containerd
    local pid
    for pid in $(_rex_k8s_shims); do
      echo "rex: k8s: stopping containerd-shim $pid"
      kill -TERM "$pid" 2>/dev/null || true
    done
    local waited=0
    while [[ -n $(_rex_k8s_shims) ]] && ((waited++ < 50)); do sleep 0.1; done
    _rex_k8s_stop_pid kube-apiserver
    _rex_k8s_stop_pid etcd
    _rex_k8s_unmount
    local link
    for link in "$REX_K8S_POD_BRIDGE" "$REX_K8S_NODE_LINK"; do
      ! ip link show "$link" >/dev/null 2>&1 || ip link del "$link"
    done
    # The kubelet's cgroups (cgroupfs driver), leaves first; gone already unless pods were left.
    local cg
    for cg in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
      [[ ! -d $cg ]] || find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [[ ! -d $cg ]] || echo "rex: k8s: could not remove $cg" >&2
    done
    # One cluster's life: etcd's data, the kubelet's root, CNI's leases. The next `up` starts
    # with an empty cluster. --one-file-system: never through a mount left behind.
    rm -rf --one-file-system "$REX_K8S_LIFE" "$REX_K8S_RUN"
  ) 9>"$REX_K8S_STATE/.lock"
}

# rex_k8s_stop: stops everything rex_k8s_setup started, by PID file, and removes what it made at
# run time (mounts, links, cgroups, /run/rex-k8s, the cluster's data). Keeps the binaries, the
# PKI, the logs and the image store.
rex_k8s_stop() {
  _rex_k8s_timed "stop" _rex_k8s_as_root _rex_k8s_stop
}

# rex_k8s_status: each component's PID, whether the apiserver answers, the node's state.
# Returns 1 unless all of it is up. (As root: a process's binary is what identifies it.)
rex_k8s_status() {
  local name pid up=1
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet; do
    if pid=$(_rex_k8s_pid "$name" 2>/dev/null); then
      printf 'rex: k8s: %-24s running (pid %s)\n' "$name" "$pid"
    else
      printf 'rex: k8s: %-24s stopped\n' "$name"
      up=0
    fi
  done
  if [[ -r $REX_K8S_ADMIN ]] && _rex_k8s_api_ready; then
    echo "rex: k8s: apiserver $REX_K8S_API ready; REX_KUBECONFIG=$REX_K8S_ADMIN"
    _rex_k8s_kubectl get node -o wide 2>&1 || true
    _rex_k8s_node_ready || up=0
  else
    echo "rex: k8s: apiserver $REX_K8S_API not answering"
    up=0
  fi
  if ((up)); then echo "rex: k8s: up"; else echo "rex: k8s: down"; return 1; fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-} in
    up) rex_k8s_setup ;;
    down) rex_k8s_stop ;;
    status) rex_k8s_status ;;
    env) echo "export REX_KUBECONFIG=$REX_K8S_ADMIN" ;;
    kubectl) shift; _rex_k8s_kubectl "$@" ;;  # the cluster's kubectl, as its admin
    server-image) _rex_k8s_timed "the rex-server image $3" rex_k8s_server_image "$2" "$3" ;;
    docker-image) _rex_k8s_timed "the image $2 from Docker" rex_k8s_docker_image "$2" ;;
    test-images)  # BINARY TAG DOCKER-IMAGE: what the k8s tests need; 77 (skip) without a cluster
      if [[ ! -S $REX_K8S_SOCK ]]; then
        echo "rex: k8s: no cluster running ($REX_K8S_SOCK is missing); scripts/k8s.sh up starts one"
        exit 77
      fi
      _rex_k8s_timed "the rex-server image $3" rex_k8s_server_image "$2" "$3"
      _rex_k8s_timed "the image $4 from Docker" rex_k8s_docker_image "$4"
      ;;
    *)
      echo "usage: $0 up|down|status|env|kubectl ARGS...|server-image BINARY TAG|docker-image NAME" >&2
      exit 2
      ;;
  esac
fi
