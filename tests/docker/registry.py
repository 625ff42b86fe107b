#!/usr/bin/env python3
"""A minimal, read-only Docker Registry HTTP API v2 server for tests of image pulls.

It serves one image, built at start from a root file system tar (--rootfs) or from an image the
local engine has (--image, read through the engine's unix socket with GET /images/{name}/get),
optionally topped by a layer of random bytes (--pad-mb) so that a pull downloads enough to
report progress several times. The padding is new random data at every start, so an engine
never has that layer already.

The image answers to every repository name, under the tags given with --tag (default: latest),
and by its manifest digest. It listens on 127.0.0.1 over plain HTTP: Docker allows
127.0.0.0/8 registries without TLS by default. The first line on stdout is the port.

Endpoints: GET /v2/, GET|HEAD /v2/<name>/manifests/<tag or digest>,
GET|HEAD /v2/<name>/blobs/<digest> (with Range), GET /v2/<name>/tags/list. Anything else gets a
404 with the registry's JSON error body.

Python 3 standard library only.
"""

import argparse
import gzip
import hashlib
import http.client
import io
import json
import os
import platform
import re
import socket
import sys
import tarfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"
LAYER_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"

# platform.machine() -> the architecture names of image configs.
ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "i686": "386",
    "i386": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}

DEFAULT_CONFIG = {
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    "Cmd": ["/bin/sh"],
}


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the engine's unix socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def engine_socket_path(docker_host):
    host = docker_host or os.environ.get("DOCKER_HOST", "") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        sys.exit(f"registry.py: --image needs a unix:// engine, got {host!r}")
    return host[len("unix://"):]


def saved_image(name, docker_host):
    """The layers (uncompressed tars, base first) and the container config of an engine's image."""
    conn = UnixHTTPConnection(engine_socket_path(docker_host), timeout=120)
    conn.request("GET", "/images/" + urllib.parse.quote(name, safe="") + "/get")
    response = conn.getresponse()
    body = response.read()
    conn.close()
    if response.status != 200:
        sys.exit(f"registry.py: the engine cannot save image {name!r}: "
                 f"{response.status} {body[:300].decode(errors='replace')}")
    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
        if len(manifest) != 1:
            sys.exit(f"registry.py: expected one image in the engine's save of {name!r}, "
                     f"got {len(manifest)}")
        layers = [archive.extractfile(path).read() for path in manifest[0]["Layers"]]
        config = json.load(archive.extractfile(manifest[0]["Config"])).get("config") or {}
    return layers, config


def rootfs_layer(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def pad_layer(megabytes):
    """A tar holding one file of random bytes: it does not compress, so its size is the download."""
    payload = os.urandom(megabytes * 1024 * 1024)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        directory = tarfile.TarInfo("rex-pad")
        directory.type = tarfile.DIRTYPE
        directory.mode = 0o755
        archive.addfile(directory)
        info = tarfile.TarInfo("rex-pad/random.bin")
        info.size = len(payload)
        info.mode = 0o644
        archive.addfile(info, io.BytesIO(payload))
    return out.getvalue()


class Image:
    """The blobs and manifest of one image, all in memory."""

    def __init__(self, layers, container_config):
        self.blobs = {}
        descriptors = []
        diff_ids = []
        for layer in layers:
            compressed = gzip.compress(layer, compresslevel=1, mtime=0)
            digest = sha256_digest(compressed)
            self.blobs[digest] = compressed
            descriptors.append({"mediaType": LAYER_TYPE, "size": len(compressed), "digest": digest})
            diff_ids.append(sha256_digest(layer))
        config = {
            "architecture": ARCHITECTURES.get(platform.machine(), platform.machine()),
            "os": "linux",
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": container_config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": "registry.py"} for _ in layers],
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_digest = sha256_digest(config_bytes)
        self.blobs[config_digest] = config_bytes
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "size": len(config_bytes), "digest": config_digest},
            "layers": descriptors,
        }
        self.manifest = json.dumps(manifest, indent=3).encode()
        self.manifest_digest = sha256_digest(self.manifest)
        self.download_size = sum(d["size"] for d in descriptors)


ROUTE = re.compile(r"^/v2/(?P<name>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
TAGS = re.compile(r"^/v2/(?P<name>.+)/tags/list$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rex-test-registry/1"

    # Set by main().
    image = None
    tags = ()
    chunk = 64 * 1024
    delay = 0.0
    verbose = False
    cut_after = 0  # bytes; the first GET of a larger blob stops there
    cut_lock = threading.Lock()
    cut_done = False

    def log_message(self, format, *args):
        if self.verbose:
            sys.stderr.write("registry.py: " + (format % args) + "\n")

    def send_json(self, status, value, extra_headers=()):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for key, val in extra_headers:
            self.send_header(key, val)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message, detail=None):
        self.send_json(status, {"errors": [{"code": code, "message": message, "detail": detail}]})

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        if path in ("/v2", "/v2/"):
            self.send_json(200, {})
            return
        tags = TAGS.match(path)
        if tags and self.command == "GET":
            self.send_json(200, {"name": tags["name"], "tags": list(self.tags)})
            return
        match = ROUTE.match(path)
        if not match:
            self.error(404, "NAME_UNKNOWN", f"this registry does not serve {path}", {"path": path})
        elif match["kind"] == "manifests":
            self.serve_manifest(match["name"], match["ref"])
        else:
            self.serve_blob(match["ref"])

    def serve_manifest(self, name, ref):
        if ref not in self.tags and ref != self.image.manifest_digest:
            self.error(404, "MANIFEST_UNKNOWN",
                       f"registry.py has no manifest {name}:{ref} (tags: {', '.join(self.tags)})",
                       {"name": name, "reference": ref})
            return
        body = self.image.manifest
        self.send_response(200)
        self.send_header("Content-Type", MANIFEST_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Content-Digest", self.image.manifest_digest)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Etag", '"' + self.image.manifest_digest + '"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def serve_blob(self, digest):
        data = self.image.blobs.get(digest)
        if data is None:
            self.error(404, "BLOB_UNKNOWN", f"registry.py has no blob {digest}", {"digest": digest})
            return
        start, end = 0, len(data) - 1
        status = 200
        ranged = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if ranged and (ranged[1] or ranged[2]):
            if ranged[1]:
                start = int(ranged[1])
                if ranged[2]:
                    end = min(int(ranged[2]), len(data) - 1)
            else:  # the last N bytes
                start = max(0, len(data) - int(ranged[2]))
            if start >= len(data) or start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Docker-Content-Digest", digest)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        if self.command == "HEAD":
            return
        stop_at = end + 1
        if self.cut_after and status == 200 and len(data) > self.cut_after:
            with self.cut_lock:
                if not Handler.cut_done:
                    Handler.cut_done = True
                    stop_at = self.cut_after
        view = memoryview(data)
        at = start
        while at < stop_at:
            stop = min(stop_at, at + self.chunk)
            self.wfile.write(view[at:stop])
            at = stop
            if self.delay and at < stop_at:
                time.sleep(self.delay)
        if stop_at <= end:
            # Fewer bytes than Content-Length promised, then the connection ends: a broken
            # download, which the engine retries from where it stopped (a Range request).
            self.close_connection = True


def watch_stdin():
    """Exits when stdin closes: the process that started us is gone."""
    while os.read(0, 4096):
        pass
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--rootfs", help="a root file system tar (plain or gzip) to serve as one layer")
    source.add_argument("--image", help="serve the layers and config of this image of the engine")
    parser.add_argument("--docker-host", help="the engine for --image (unix://...; default: "
                        "DOCKER_HOST or unix:///var/run/docker.sock)")
    parser.add_argument("--tag", action="append", help="a tag to serve (repeatable; default latest)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--pad-mb", type=int, default=0,
                        help="add a layer of this many MiB of random bytes")
    parser.add_argument("--chunk-kb", type=int, default=64, help="blob write size")
    parser.add_argument("--delay-ms", type=float, default=0, help="pause after each blob chunk")
    parser.add_argument("--cut-once-after-mb", type=float, default=0,
                        help="break the first download of a larger blob after this many MiB")
    parser.add_argument("--exit-on-stdin-eof", action="store_true",
                        help="exit when stdin closes (stdin is a pipe from the starting process)")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args()
    if args.pad_mb < 0 or args.chunk_kb <= 0 or args.delay_ms < 0 or args.cut_once_after_mb < 0:
        parser.error("--pad-mb, --delay-ms and --cut-once-after-mb must not be negative, "
                     "--chunk-kb must be positive")

    if args.rootfs:
        layers, config = [rootfs_layer(args.rootfs)], dict(DEFAULT_CONFIG)
    else:
        layers, config = saved_image(args.image, args.docker_host)
    if args.pad_mb:
        layers.append(pad_layer(args.pad_mb))

    Handler.image = Image(layers, config)
    Handler.tags = tuple(args.tag or ["latest"])
    Handler.chunk = args.chunk_kb * 1024
    Handler.delay = args.delay_ms / 1000.0
    Handler.verbose = args.verbose
    Handler.cut_after = int(args.cut_once_after_mb * 1024 * 1024)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    print(json.dumps({"manifest_digest": Handler.image.manifest_digest,
                      "download_size": Handler.image.download_size}), flush=True)
    if args.exit_on_stdin_eof:
        threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
