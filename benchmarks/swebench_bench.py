#!/usr/bin/env python3
"""`rex swebench` against swebench 5.0.2's harness, and rex's own per-instance overhead against
bare Docker Engine calls doing the same work, in the same run.

    swebench_bench.py REX [--rounds 3] [--max-workers 4] [--copies 4] [--work DIR]

Datasets: the test dataset of tests/swebench/make_dataset.py without its instance that hangs
until the timeout (12 instances with a patch), and a larger one made of --copies copies of
those (48 by default). For each, the two harnesses run alternately, --rounds times each, with
the same --max_workers, each round in a fresh directory; printed: every wall time, the median
and the spread, and the ratio rex / harness.

Per-instance overhead (time beyond the eval script's own run):
- rex: its record of each instance (the whole instance, less the eval script's run);
- the harness: run_instance.log's first line to its last, less the test runtime it logs (it
  logs nothing after grading, so its container removal is not counted: an underestimate);
- the floor: the same steps as bare Engine API calls over the unix socket, one instance at a
  time: create and start a container from the instance's image, put the patch in, git apply,
  git diff, put eval.sh in, (the eval script, not counted), read its output, git diff, stop and
  remove. The same instances as rex's one-at-a-time run of the same dataset (--max_workers 1),
  alternated with it.
"""

import argparse
import http.client
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEBENCH_PYTHON = ROOT / "build" / "swebench-env" / "bin" / "python"
DOCKER_SOCKET = "/var/run/docker.sock"
SKIP = {"rex-test__shkit-timeout"}


# --- Datasets -----------------------------------------------------------------------------------

def make_datasets(work, copies):
    base = work / "ds"
    done = subprocess.run([sys.executable, str(ROOT / "tests/swebench/make_dataset.py"),
                           "--engine", "docker", str(base)], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        sys.exit(f"make_dataset.py: {done.stderr}")
    instances = [json.loads(l) for l in (base / "dataset.jsonl").read_text().splitlines()]
    preds = {p["instance_id"]: p for p in
             map(json.loads, (base / "predictions.jsonl").read_text().splitlines())}
    keep = [i for i in instances if i["instance_id"] not in SKIP
            and preds[i["instance_id"]]["model_patch"]]
    out = {}
    for name, n in [("small", 1), ("large", copies)]:
        d = work / name
        d.mkdir(exist_ok=True)
        rows, prows = [], []
        for k in range(n):
            for i in keep:
                iid = i["instance_id"] if n == 1 else f"{i['instance_id']}-{k}"
                rows.append(dict(i, instance_id=iid))
                prows.append(dict(preds[i["instance_id"]], instance_id=iid))
        (d / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in prows))
        out[name] = (d, len(rows))
    return out


# --- The two harnesses --------------------------------------------------------------------------

def run_rex(rex, dataset, cwd, workers):
    cmd = [rex, "swebench", "--dataset_name", str(dataset / "dataset.jsonl"),
           "--predictions_path", str(dataset / "predictions.jsonl"), "-id", "bench",
           "--max_workers", str(workers), "--timeout", "300", "--report_dir", "reports", "-q"]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - start
    if done.returncode not in (0, 1):
        sys.exit(f"rex swebench exited {done.returncode}: {done.stderr[-2000:]}")
    overheads = []
    for line in (cwd / "logs/run_evaluation/bench/rex.rex-test__model-a.jsonl").read_text().splitlines():
        r = json.loads(line)
        overheads.append(r["seconds"] - r["phases"]["eval"])
    return wall, overheads


def run_harness(dataset, cwd, workers):
    cmd = [str(SWEBENCH_PYTHON), "-m", "swebench.harness.run_evaluation",
           "--dataset_name", str(dataset / "dataset.jsonl"),
           "--predictions_path", str(dataset / "predictions.jsonl"), "--run_id", "bench",
           "--max_workers", str(workers), "--timeout", "300", "--report_dir", "reports"]
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               DOCKER_HOST=f"unix://{DOCKER_SOCKET}")
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600, env=env)
    wall = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"the harness exited {done.returncode}: {done.stderr[-2000:]}")
    overheads = []
    stamp = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - ")
    runtime = re.compile(r"Test runtime: ([\d_.]+) seconds")
    for log in (cwd / "logs/run_evaluation/bench").glob("*/*/run_instance.log"):
        text = log.read_text()
        times = [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
                 for m in map(stamp.match, text.splitlines()) if m]
        test = runtime.search(text)
        if times and test:
            overheads.append((times[-1] - times[0]).total_seconds() -
                             float(test.group(1).replace("_", "")))
    return wall, overheads


# --- The floor: bare Engine API calls -----------------------------------------------------------

class Engine:
    def __init__(self):
        self.conn = None

    def call(self, method, path, body=None, raw=None, headers=None):
        conn = http.client.HTTPConnection("localhost", timeout=600)
        conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.sock.connect(DOCKER_SOCKET)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = dict(headers or {})
        if body is not None:
            h["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {payload[:300]!r}")
        return payload

    def put_file(self, cid, directory, name, data):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        self.call("PUT", f"/containers/{cid}/archive?path={directory}", raw=buf.getvalue(),
                  headers={"Content-Type": "application/x-tar"})

    def exec(self, cid, argv, workdir=None):
        spec = {"Cmd": argv, "AttachStdout": True, "AttachStderr": True}
        if workdir:
            spec["WorkingDir"] = workdir
        eid = json.loads(self.call("POST", f"/containers/{cid}/exec", spec))["Id"]
        out = self.call("POST", f"/exec/{eid}/start", {"Detach": False, "Tty": False})
        code = json.loads(self.call("GET", f"/exec/{eid}/json"))["ExitCode"]
        return code, out


def floor_instance(engine, instance, patch, script):
    """Returns (overhead, eval seconds)."""
    t0 = time.monotonic()
    cid = json.loads(engine.call("POST", "/containers/create", {
        "Image": instance["image"], "Cmd": ["sleep", "infinity"], "Tty": False}))["Id"]
    engine.call("POST", f"/containers/{cid}/start")
    engine.put_file(cid, "/tmp", "patch.diff", patch.encode())
    code, _ = engine.exec(cid, ["git", "apply", "--verbose", "/tmp/patch.diff"], "/testbed")
    if code != 0:  # the chain's fallbacks, as the harnesses try them
        for argv in (["git", "apply", "--verbose", "--3way", "/tmp/patch.diff"],
                     ["git", "apply", "--verbose", "--reject", "/tmp/patch.diff"],
                     ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i", "/tmp/patch.diff"]):
            engine.exec(cid, ["/bin/bash", "-c", "git checkout -- . ; git clean -fd"], "/testbed")
            if engine.exec(cid, argv, "/testbed")[0] == 0:
                break
    engine.exec(cid, ["git", "-c", "core.fileMode=false", "diff"], "/testbed")
    engine.put_file(cid, "/", "eval.sh", script.encode())
    t1 = time.monotonic()
    engine.exec(cid, ["/bin/bash", "-c", "/bin/bash /eval.sh > /tmp/out.txt 2>&1"])
    t2 = time.monotonic()
    engine.call("GET", f"/containers/{cid}/archive?path=/tmp/out.txt")
    engine.exec(cid, ["git", "-c", "core.fileMode=false", "diff"], "/testbed")
    engine.call("POST", f"/containers/{cid}/kill")
    engine.call("DELETE", f"/containers/{cid}?force=1")
    t3 = time.monotonic()
    return (t1 - t0) + (t3 - t2), t2 - t1


def run_floor(dataset, rex_round_dir):
    """The floor over the instances rex ran, with the eval scripts rex wrote."""
    engine = Engine()
    overheads = []
    for line in (dataset / "dataset.jsonl").read_text().splitlines():
        instance = json.loads(line)
        d = rex_round_dir / "logs/run_evaluation/bench/rex-test__model-a" / instance["instance_id"]
        if not (d / "eval.sh").exists():
            continue
        overheads.append(floor_instance(engine, instance, (d / "patch.diff").read_text(),
                                        (d / "eval.sh").read_text())[0])
    return overheads


# --- Report -------------------------------------------------------------------------------------

def spread(xs):
    return f"median {statistics.median(xs):.2f}s (min {min(xs):.2f}, max {max(xs):.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rex")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-workers", type=int, default=4)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    rex = str(Path(args.rex).resolve())
    work = args.work or Path(tempfile.mkdtemp(prefix="rex-swebench-bench-"))
    datasets = make_datasets(work, args.copies)
    for name, (dataset, n) in datasets.items():
        walls = {"rex": [], "harness": []}
        over = {"rex": [], "harness": []}
        for k in range(args.rounds):
            for who in (["rex", "harness"] if k % 2 == 0 else ["harness", "rex"]):
                cwd = work / f"{name}-{who}-{k}"
                cwd.mkdir()
                wall, o = (run_rex(rex, dataset, cwd, args.max_workers) if who == "rex"
                           else run_harness(dataset, cwd, args.max_workers))
                walls[who].append(wall)
                over[who].extend(o)
                print(f"{name} ({n} instances) round {k + 1} {who}: {wall:.2f}s", flush=True)
                shutil.rmtree(cwd)
        ratio = statistics.median(walls["rex"]) / statistics.median(walls["harness"])
        print(f"== {name}: {n} instances, --max_workers {args.max_workers}, {args.rounds} rounds")
        print(f"   wall      rex {spread(walls['rex'])}   harness {spread(walls['harness'])}")
        print(f"   ratio     rex / harness = {ratio:.2f} (target <= 0.5)")
        print(f"   overhead per instance: rex {spread(over['rex'])}, "
              f"harness {spread(over['harness'])}")

    # rex one instance at a time against the floor doing the same steps, alternated.
    dataset, n = datasets["small"]
    rex_over, floor_over = [], []
    for k in range(args.rounds):
        cwd = work / f"floor-rex-{k}"
        cwd.mkdir()
        _, o = run_rex(rex, dataset, cwd, 1)
        rex_over.extend(o)
        floor_over.extend(run_floor(dataset, cwd))
        shutil.rmtree(cwd)
    ratio = statistics.median(rex_over) / statistics.median(floor_over)
    print(f"== overhead one at a time ({n} instances x {args.rounds} rounds)")
    print(f"   rex   {spread(rex_over)}")
    print(f"   floor {spread(floor_over)}  (bare Engine API calls, the same steps)")
    print(f"   ratio rex / floor = {ratio:.2f} (target <= 1.2)")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
