#!/usr/bin/env python3
"""Packs a root file system directory into a one-layer image in the docker-archive format
(manifest.json with RepoTags), which `ctr images import` reads, so scripts/k8s.sh needs no
registry. The output depends only on the files: times are 0 and owners root.

usage: mkimage.py OUT.tar REPO:TAG ROOTFS_DIR [--entrypoint JSON] [--cmd JSON] [--env K=V]...
"""
import argparse
import hashlib
import io
import json
import os
import tarfile


def layer_of(root):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(root):
            dirs.sort()  # os.walk descends in this order: sorted makes the layer reproducible
            for name in dirs + sorted(files):
                path = os.path.join(top, name)
                info = tar.gettarinfo(path, os.path.relpath(path, root))
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:  # directories, symbolic and hard links
                    tar.addfile(info)
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("ref")
    p.add_argument("root")
    p.add_argument("--entrypoint", type=json.loads, default=None)
    p.add_argument("--cmd", type=json.loads, default=None)
    p.add_argument("--env", action="append", default=[])
    a = p.parse_args()

    layer = layer_of(a.root)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    epoch = "1970-01-01T00:00:00Z"
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": epoch,
        "config": {
            "Entrypoint": a.entrypoint,
            "Cmd": a.cmd,
            "Env": a.env or ["PATH=/bin:/sbin"],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": epoch, "created_by": "scripts/k8s/mkimage.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [a.ref], "Layers": ["layer.tar"]}])

    part = a.out + ".part"
    with tarfile.open(part, "w") as tar:
        for name, data in ((config_name, config_bytes), ("layer.tar", layer),
                           ("manifest.json", manifest.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    os.replace(part, a.out)  # a run cut off leaves no half archive under the real name


if __name__ == "__main__":
    main()
