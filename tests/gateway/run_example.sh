#!/usr/bin/env bash
# Runs examples/gateway_client.py against a fresh gateway: run_example.sh REX EXAMPLE
set -euo pipefail
rex=$1 example=$2
dir=$(mktemp -d /tmp/rex-gw-example-XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$rex" gateway --listen "127.0.0.1:$port" --storage "$dir/storage" --log-level warn &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # Sandboxes the example left (none when it passes) end with their server.
  for f in "$dir"/storage/sandboxes/*/sandbox.json; do
    [[ -e $f ]] && kill "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$f")" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.1
done
timeout 120 python3 "$example" "http://127.0.0.1:$port"
