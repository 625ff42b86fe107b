#!/usr/bin/env python3
"""`rex swebench` against swebench 5.0.2's own harness on the dataset of make_dataset.py: the
files and verdicts must be the harness's.

    test_harness.py REX [--deployment docker|podman|gateway|kubernetes] [--work DIR]

The harness's run (docker, offline) is the reference; it is made once per dataset, harness
version and rex source of the test, under build/swebench-reference/, and reused by the tests of
the other deployments. Then rex runs the same dataset and predictions on the deployment given,
and for every instance report.json, patch.diff and eval.sh must be the harness's byte for byte,
the same files must exist, the test output must hold the same results, and the summary must be
the harness's (on docker byte for byte; elsewhere without the fields only a docker client fills).

On docker the run goes on to what the harness does not have or what only a rerun shows: a rerun
skips what has a report, --rewrite_reports gives the same reports, a SIGKILL loses no finished
instance and `rex gc` removes what it left, a gold run checks the dataset, --repeat reports
flakiness, and the HTML report shows in headless Chromium what a person should see.
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REX_ROOT = HERE.parents[1]
SWEBENCH_PYTHON = REX_ROOT / "build" / "swebench-env" / "bin" / "python"
RUN_ID = "rex-check"
TIMEOUT = 30
MODEL_DIR = "rex-test__model-a"

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
        print(f"FAIL: {message}", flush=True)
    return ok


def step(text):
    print(f"--- {text}", flush=True)


def run(cmd, timeout, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def make_dataset(engine, out):
    done = run([sys.executable, str(HERE / "make_dataset.py"), "--engine", engine, str(out)], 900)
    if done.returncode != 0:
        sys.exit(f"make_dataset.py failed:\n{done.stdout}\n{done.stderr}")
    print(done.stdout.strip())


def reference(dataset):
    """The harness's own run of the dataset (cached); returns its work directory."""
    key = hashlib.sha256()
    for part in [dataset / "dataset.jsonl", dataset / "predictions.jsonl",
                 HERE / "requirements.txt", HERE / "run_harness.py"]:
        key.update(part.read_bytes())
    cache = REX_ROOT / "build" / "swebench-reference"
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / key.hexdigest()[:16]
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (work / ".complete").exists():
            shutil.rmtree(work, ignore_errors=True)
            step("the harness's own run (the reference)")
            # The harness reads a container's output as Docker's stream interleaves its two
            # pipes, which now and then glues a marker to a stderr line and makes it grade a good
            # log INVALID_LOG: a run that misses the dataset's verdicts is made again, up to
            # three times, each one shown.
            for attempt in range(1, 4):
                start = time.monotonic()
                done = run([str(SWEBENCH_PYTHON), str(HERE / "run_harness.py"), "--engine",
                            "docker", "--run-id", RUN_ID, "--timeout", str(TIMEOUT), str(dataset),
                            str(work)], TIMEOUT + 900)
                print(done.stdout.strip())
                if done.returncode == 0:
                    break
                if attempt == 3:
                    sys.exit(f"the harness did not give the dataset's verdicts in three runs:\n"
                             f"{done.stderr}")
                print(f"the harness's run {attempt} missed the dataset's verdicts; again")
            print(f"the harness took {time.monotonic() - start:.1f}s")
            (work / ".complete").touch()
        # Drop the caches of other datasets.
        for old in cache.iterdir():
            if old.is_dir() and old != work:
                shutil.rmtree(old, ignore_errors=True)
    return work


def rex_swebench(rex, cwd, dataset, deployment_args, *extra, timeout=600, predictions=None):
    cmd = [rex, "swebench", "--dataset_name", str(dataset / "dataset.jsonl"),
           "--predictions_path", predictions or str(dataset / "predictions.jsonl"),
           "-id", RUN_ID, "--max_workers", "4", "--timeout", str(TIMEOUT),
           "--report_dir", "reports", *deployment_args, *extra]
    return run(cmd, timeout, cwd=cwd)


def instance_dirs(root, run_id=RUN_ID):
    base = root / "logs" / "run_evaluation" / run_id / MODEL_DIR
    return {p.name: p for p in base.iterdir()} if base.exists() else {}


def results_of(test_output):
    """What grading reads in a test output: the lines that carry results, in order, and the
    markers and recorded exit codes wherever they are (stdout and stderr arrive through two pipes
    in Docker's stream, so the harness's output can glue a marker to the end of another line)."""
    keep = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|ok |not ok |test_\S+ \(.*\.\.\.)")
    # The echoed exit code can land inside a line of the other pipe ("test_x (t.T) ... >>>>> Test
    # Exit Code: 0\nok"): taken out with its newline, the line it split is whole again.
    unglued = re.sub(r">>>>> Test Exit Code: -?\d+\n", "", test_output)
    lines = [line for line in unglued.splitlines() if keep.match(line)]
    markers = {m: test_output.count(m) for m in [">>>>> Start Test Output",
                                                 ">>>>> End Test Output", "Timeout error"]}
    return lines, markers, sorted(re.findall(r">>>>> Test Exit Code:\s*(-?\d+)", test_output))


def compare_runs(ref, got, summary_exact):
    ref_dirs, got_dirs = instance_dirs(ref), instance_dirs(got)
    check(sorted(ref_dirs) == sorted(got_dirs),
          f"instance folders: harness {sorted(ref_dirs)}, rex {sorted(got_dirs)}")
    for iid, ref_dir in sorted(ref_dirs.items()):
        got_dir = got_dirs.get(iid)
        if got_dir is None:
            continue
        ref_files = sorted(p.name for p in ref_dir.iterdir() if p.name != "image_assets")
        got_files = sorted(p.name for p in got_dir.iterdir() if p.name != "image_assets")
        check(ref_files == got_files, f"{iid}: files: harness {ref_files}, rex {got_files}")
        for name in ["report.json", "patch.diff", "eval.sh"]:
            a, b = ref_dir / name, got_dir / name
            if a.exists() and b.exists():
                check(a.read_bytes() == b.read_bytes(),
                      f"{iid}: {name} differs:\n--- harness\n{a.read_text()[:3000]}\n--- rex\n"
                      f"{b.read_text()[:3000]}")
        a, b = ref_dir / "test_output.txt", got_dir / "test_output.txt"
        if a.exists() and b.exists():
            check(results_of(a.read_text()) == results_of(b.read_text()),
                  f"{iid}: test_output.txt holds other results:\n--- harness\n"
                  f"{a.read_text()[-2000:]}\n--- rex\n{b.read_text()[-2000:]}")
        a, b = ref_dir / "run_instance.log", got_dir / "run_instance.log"
        for name in (p.name for p in (ref_dir / "image_assets").glob("*")):
            staged = got_dir / "image_assets" / name
            check(staged.exists() and
                  (ref_dir / "image_assets" / name).read_bytes() == staged.read_bytes(),
                  f"{iid}: image_assets/{name}: not the harness's staged asset")
        for marker in [">>>>> Applied Patch", ">>>>> Patch Apply Failed", "Staged 1 patch asset",
                       "verified already applied", "Git diff changed after running eval script"]:
            check((marker in a.read_text()) == (marker in b.read_text()),
                  f"{iid}: run_instance.log: \"{marker}\" in the harness's: "
                  f"{marker in a.read_text()}, in rex's: {marker in b.read_text()}")
        check(a.read_text().count("Failed to apply patch to container: ") ==
              b.read_text().count("Failed to apply patch to container: "),
              f"{iid}: another command of the patch chain applied the patch")
    summary = f"{MODEL_DIR}.{RUN_ID}.json"
    a, b = ref / "reports" / summary, got / "reports" / summary
    if check(b.exists(), f"rex wrote no summary {b}"):
        if summary_exact:
            check(a.read_bytes() == b.read_bytes(),
                  f"the summary differs:\n--- harness\n{a.read_text()}\n--- rex\n{b.read_text()}")
        else:
            client_fields = {"unstopped_instances", "unstopped_containers", "unremoved_images"}
            ra = {k: v for k, v in json.loads(a.read_text()).items() if k not in client_fields}
            rb = {k: v for k, v in json.loads(b.read_text()).items() if k not in client_fields}
            check(ra == rb, f"the summary differs:\n--- harness\n{ra}\n--- rex\n{rb}")
    ra = json.loads((ref / "logs/run_evaluation" / RUN_ID / "run.json").read_text())
    rb = json.loads((got / "logs/run_evaluation" / RUN_ID / "run.json").read_text())
    # The reference may come from another work directory: the dataset's path differs there.
    ra["dataset"], rb["dataset"] = Path(ra["dataset"]).name, Path(rb["dataset"]).name
    for field in ["dataset", "split", "task_repo"]:
        check(ra[field] == rb[field], f"run.json: {field}: harness {ra[field]!r}, rex {rb[field]!r}")


def reports(root, run_id=RUN_ID):
    return {iid: (d / "report.json").read_bytes() for iid, d in instance_dirs(root, run_id).items()
            if (d / "report.json").exists()}


def docker_only_checks(rex, ref, work, dataset, deployment_args):
    expected = json.loads((dataset / "expected.json").read_text())
    got = work / "rex"

    step("a rerun skips every instance that has a report")
    before = reports(got)
    r = rex_swebench(rex, got, dataset, deployment_args, "--instance_ids", "rex-test__calc-full",
                     "rex-test__calc-no-apply")
    check("1 instance already run, skipping" in r.stderr, f"rerun: stderr: {r.stderr}")
    check("[1/1] rex-test__calc-no-apply error" in r.stderr, f"rerun: stderr: {r.stderr}")
    check(reports(got) == before, "a rerun changed a report")

    step("--rewrite_reports true grades the outputs again: the same reports")
    for d in instance_dirs(got).values():
        (d / "report.json").unlink(missing_ok=True)
    r = rex_swebench(rex, got, dataset, deployment_args, "--rewrite_reports", "true")
    rewritten = reports(got)
    # As the harness, every test output is graded, the timed-out one too (it has no results).
    check(set(rewritten) - set(before) == {"rex-test__shkit-timeout"},
          f"rewritten: {sorted(rewritten)}, before: {sorted(before)}; stderr: {r.stderr}")
    check({k: v for k, v in rewritten.items() if k in before} == before,
          f"rewritten reports differ; stderr: {r.stderr}")
    timed_out = json.loads(rewritten["rex-test__shkit-timeout"])["rex-test__shkit-timeout"]
    check(timed_out.get("infra_failure_reason") == "tests_timed_out" and not timed_out["resolved"],
          f"the timed-out instance graded again: {timed_out}")

    step("SIGKILL in the middle loses no finished instance; a rerun finishes; rex gc cleans up")
    killed = work / "killed"
    killed.mkdir()
    ids = ["rex-test__calc-full", "rex-test__textkit-full", "rex-test__shkit-timeout",
           "rex-test__calc-partial", "rex-test__calc-p2p-broken"]
    cmd = [rex, "swebench", "--dataset_name", str(dataset / "dataset.jsonl"),
           "--predictions_path", str(dataset / "predictions.jsonl"), "-id", RUN_ID,
           "--max_workers", "2", "--timeout", str(TIMEOUT), "--report_dir", "reports",
           "--instance_ids", *ids, *deployment_args]
    proc = subprocess.Popen(cmd, cwd=killed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(reports(killed)) < 2:
        time.sleep(0.2)
    finished = reports(killed)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    check(len(finished) >= 2, f"no report within 120 s before the kill ({finished.keys()})")
    left = run(["docker", "ps", "-aq", "--filter", f"label=rex.owner.pid={proc.pid}"], 60)
    r = run(cmd, 600, cwd=killed)
    check(f"{len(finished)} instance{'s' if len(finished) != 1 else ''} already run" in r.stderr,
          f"the rerun after the kill did not skip the {len(finished)} finished: {r.stderr}")
    for iid, data in finished.items():
        check(reports(killed)[iid] == data, f"{iid}: its report changed after the kill")
    for iid in ids:
        if expected[iid]["verdict"].startswith("RESOLVED"):
            check(reports(killed).get(iid) == reports(ref).get(iid),
                  f"{iid}: after the kill and rerun, not the harness's report")
    gc = run([rex, "gc"], 120)
    check(gc.returncode == 0, f"rex gc: {gc.stdout}{gc.stderr}")
    remaining = run(["docker", "ps", "-aq", "--filter", f"label=rex.owner.pid={proc.pid}"], 60)
    check(remaining.stdout.strip() == "",
          f"containers of the killed run remain after rex gc (before: {left.stdout.split()}, "
          f"after: {remaining.stdout.split()})")

    step("an image the engine does not have: an error naming the instance, nothing started")
    missing = work / "missing"
    missing.mkdir()
    rows = [json.loads(line) for line in (dataset / "dataset.jsonl").read_text().splitlines()]
    rows[3]["image"] = "rex-swebench/no-such-image:1"
    (missing / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (missing / "predictions.jsonl").write_text((dataset / "predictions.jsonl").read_text())
    r = rex_swebench(rex, missing, missing, deployment_args + ["--pull", "never"])
    check(r.returncode == 2, f"missing image: exit {r.returncode}: {r.stderr}")
    check(f"dataset.jsonl:4 ({rows[3]['instance_id']}): image: rex-swebench/no-such-image:1: "
          "not on the engine" in r.stderr, f"missing image: {r.stderr}")
    check(not (missing / "logs").exists(), "missing image: logs/ exists: something started")

    step("a gold run checks the dataset")
    gold = work / "gold"
    gold.mkdir()
    r = rex_swebench(rex, gold, dataset, deployment_args, "--instance_ids", "rex-test__calc-full",
                     "rex-test__textkit-full", predictions="gold")
    check(r.returncode == 0, f"gold run exit {r.returncode}: {r.stderr}")
    check("Dataset check: all 2 gold patches resolve their instances" in r.stdout,
          f"gold run: {r.stdout}")

    step("--repeat 2: two runs, flakiness compared")
    rep = work / "repeat"
    rep.mkdir()
    r = rex_swebench(rex, rep, dataset, deployment_args, "--repeat", "2", "--instance_ids",
                     "rex-test__calc-full", "rex-test__calc-partial")
    check("Repeats: 2 runs; 0 flaky tests, 0 flaky verdicts" in r.stdout, f"repeat: {r.stdout}")
    flaky = json.loads((rep / "reports" / f"{RUN_ID}.flaky.json").read_text())
    check(flaky["run_ids"] == [RUN_ID, f"{RUN_ID}.2"], f"flaky.json: {flaky}")
    check(reports(rep, f"{RUN_ID}.2") == reports(rep), "the second run's reports differ")


def html_check(ref, got, work, dataset):
    expected = json.loads((dataset / "expected.json").read_text())
    step("the HTML report, in headless Chromium")
    html = got / "reports" / f"{MODEL_DIR}.{RUN_ID}.html"
    if check(html.exists(), f"no HTML report at {html}"):
        summary = json.loads((ref / "reports" / f"{MODEL_DIR}.{RUN_ID}.json").read_text())
        status = {}
        for key, value in [("resolved_ids", "resolved"), ("unresolved_ids", "unresolved"),
                           ("error_ids", "error"), ("empty_patch_ids", "empty_patch")]:
            for iid in summary[key]:
                status[iid] = value
        want = {"resolved": summary["resolved_instances"], "total": summary["total_instances"],
                "instances": {}}
        for iid, e in expected.items():
            v = e["verdict"] if e["verdict"].startswith("RESOLVED_") else ""
            if e["verdict"] == "INVALID_LOG":
                v = "RESOLVED_NO"
            want["instances"][iid] = {"status": status[iid], "verdict": v}
        spec = work / "html-expected.json"
        spec.write_text(json.dumps(want, indent=2))
        r = run([sys.executable, str(HERE / "html_check.py"), str(html), str(spec)], 300)
        print(r.stdout.strip())
        check(r.returncode == 0, f"html_check.py: {r.stdout}{r.stderr}")



def images_of(dataset):
    return sorted({json.loads(line)["image"]
                   for line in (dataset / "dataset.jsonl").read_text().splitlines()})


KUBECONFIG = os.environ.get("REX_KUBECONFIG", "/var/lib/rex-k8s/admin.kubeconfig")


def kubernetes_deployment(dataset, work):
    """The dataset's images copied from Docker into the local cluster (scripts/k8s.sh); a
    kubernetes deployment config that never pulls."""
    if not os.path.exists(KUBECONFIG):
        sys.exit(f"no local cluster ({KUBECONFIG} is missing): scripts/k8s.sh up starts one")
    for image in images_of(dataset):
        done = run(["bash", str(REX_ROOT / "scripts" / "k8s.sh"), "docker-image", image], 600)
        if done.returncode != 0:
            sys.exit(f"copying {image} into the cluster failed:\n{done.stdout}{done.stderr}")
    config = work / "k8s.json"
    config.write_text(json.dumps({"type": "kubernetes", "kubeconfig": KUBECONFIG,
                                  "image_pull_policy": "Never"}))
    return ["--deployment", str(config)]


def start_gateway(rex, dataset, work):
    """A rex gateway on loopback whose registry has one docker environment per image."""
    registry = work / "registry" / "environments"
    registry.mkdir(parents=True)
    for n, image in enumerate(images_of(dataset)):
        (registry / f"swebench-{n}.yaml").write_text(
            f"name: swebench-{n}\nprovider: docker\nimage: {image}\nspares: 0\n")
    log = open(work / "gateway.log", "w+")
    gateway = subprocess.Popen([rex, "gateway", "--listen", "127.0.0.1:0", "--storage",
                                str(work / "storage"), "--registry", str(work / "registry")],
                               stdout=log, stderr=subprocess.STDOUT, cwd=work)
    deadline = time.monotonic() + 60
    url = None
    while url is None and time.monotonic() < deadline and gateway.poll() is None:
        time.sleep(0.2)
        m = re.search(r"listening on (http://[0-9.:]+)", (work / "gateway.log").read_text())
        url = m.group(1) if m else None
    if url is None:
        gateway.kill()
        sys.exit(f"the gateway did not start:\n{(work / 'gateway.log').read_text()}")
    print(f"gateway at {url}")
    return gateway, ["--deployment", "gateway", "--url", url]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rex")
    parser.add_argument("--deployment", default="docker",
                        choices=["docker", "podman", "gateway", "kubernetes"])
    parser.add_argument("--work", type=Path)
    parser.add_argument("--parse-logs", type=Path,
                        help="rex_swebench_parse_logs: also check rex's parsers against "
                             "swebench's on the test outputs of the run")
    args = parser.parse_args()
    rex = str(Path(args.rex).resolve())
    work = args.work or Path(tempfile.mkdtemp(prefix=f"rex-swebench-{args.deployment}-"))
    work.mkdir(parents=True, exist_ok=True)

    step("the dataset (three repositories, their images)")
    dataset = work / "ds"
    make_dataset("docker", dataset)
    ref = reference(dataset)

    gateway = None
    if args.deployment == "docker":
        deployment_args = ["--deployment", "docker"]
    elif args.deployment == "podman":
        make_dataset("podman", work / "ds-podman")  # the same images, in Podman's store
        deployment_args = ["--deployment", "podman"]
    elif args.deployment == "kubernetes":
        deployment_args = kubernetes_deployment(dataset, work)
    else:
        gateway, deployment_args = start_gateway(rex, dataset, work)

    step(f"rex swebench on {args.deployment}")
    got = work / "rex"
    got.mkdir()
    start = time.monotonic()
    r = rex_swebench(rex, got, dataset, deployment_args)
    print(r.stderr.strip())
    print(r.stdout.strip())
    print(f"rex took {time.monotonic() - start:.1f}s")
    check(r.returncode == 1, f"exit status {r.returncode}, expected 1 (two instances end in errors)")
    check("[13/13]" in r.stderr, "no progress line [13/13]")
    compare_runs(ref, got, summary_exact=args.deployment == "docker")
    if gateway:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(timeout=60)

    if args.parse_logs:
        step("rex's parsers against swebench's on the run's test outputs")
        logs = work / "parser-logs"
        logs.mkdir()
        parsers = {}
        for line in (dataset / "dataset.jsonl").read_text().splitlines():
            instance = json.loads(line)
            parsers[instance["instance_id"]] = instance["log_parser"]
        for iid, d in instance_dirs(got).items():
            if (d / "test_output.txt").exists():
                text = (d / "test_output.txt").read_text()
                (logs / f"{parsers[iid]}__{iid}.txt").write_text(text)
        r = run([str(SWEBENCH_PYTHON), str(HERE / "test_parsers.py"), str(args.parse_logs),
                 "--logs", str(logs), "--only", ",".join(sorted(set(parsers.values())))], 600)
        print(r.stdout.strip()[-3000:])
        check(r.returncode == 0, f"test_parsers.py on the run's logs: {r.stderr[-2000:]}")

    if args.deployment == "docker":
        html_check(ref, got, work, dataset)
        docker_only_checks(rex, ref, work, dataset, deployment_args)

    if failures:
        print(f"\n{len(failures)} check(s) failed (work directory kept: {work})")
        sys.exit(1)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print("all checks passed")


if __name__ == "__main__":
    main()
