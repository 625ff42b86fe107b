#!/usr/bin/env python3
"""Runs swebench 5.0.2's own harness (`python -m swebench.harness.run_evaluation`) offline on the
dataset of make_dataset.py and checks each instance's verdict against the expected one.

    run_harness.py [--engine docker|podman] [--timeout 30] DATASET_DIR WORK_DIR

DATASET_DIR is make_dataset.py's OUT_DIR (made with the same --engine). The harness runs in
WORK_DIR, where it writes logs/run_evaluation/RUN_ID/rex-test__model-a/INSTANCE/ (report.json,
run_instance.log, test_output.txt, patch.diff, eval.sh), and WORK_DIR/harness.log gets its own
output. docker-py and the `docker` CLI the harness also runs both reach the engine through
DOCKER_HOST: Docker's socket, or for podman REX_PODMAN_SOCKET (scripts/common.sh's default).

The harness creates its containers with no ulimits, so where Podman cannot apply its own
defaults (nofile and nproc 1048576, above this sandbox's hard limit of open files) every
container fails to start ("error setting rlimit type 7: operation not permitted") and every
instance that runs ends as an error; a Podman service whose containers.conf sets
default_ulimits within the limits runs them all.

Prints a table of the verdicts and exits 1 when one differs from expected.json, when the
command of the harness's patch chain that applied a patch is not the expected one, when the
harness's run report (WORK_DIR/reports/) disagrees, or when the harness found an instance's git
diff changed by its eval script (no eval script of the dataset changes it: such a run is not a
reference; its two diffs are printed).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REX_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PYTHON = REX_ROOT / "build" / "swebench-env" / "bin" / "python"
SOCKETS = {
    "docker": "unix:///var/run/docker.sock",
    "podman": "unix://" + os.environ.get("REX_PODMAN_SOCKET", "/run/podman/podman.sock"),
}
# What run_instance.log says about the harness's chain of patch commands (GIT_APPLY_CMDS).
APPLY_FAILED = "Failed to apply patch to container: "
APPLIED = ">>>>> Applied Patch"
ALREADY_APPLIED = ">>>>> Applied Patch: verified already applied"
APPLY_FAIL = ">>>>> Patch Apply Failed"
TIMED_OUT = "Timeout error: "
DIFF_CHANGED = "Git diff changed after running eval script"
LOG_LINE = re.compile(r"\n\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - ")


def harness_env(engine):
    env = dict(os.environ)
    env.update({
        # Nothing may reach Hugging Face: the dataset is a local file.
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "DOCKER_HOST": SOCKETS[engine],
        "PYTHONUNBUFFERED": "1",
    })
    return env


def run_harness(args, run_id, report_dir):
    """Runs the harness in WORK_DIR; returns its wall time in seconds."""
    cmd = [str(args.python), "-m", "swebench.harness.run_evaluation",
           "--dataset_name", str(args.dataset / "dataset.jsonl"),
           "--predictions_path", str(args.dataset / "predictions.jsonl"),
           "--run_id", run_id,
           "--max_workers", str(args.max_workers),
           "--timeout", str(args.timeout),
           "--report_dir", str(report_dir)]
    log = args.work / "harness.log"
    print(f"run_harness: {' '.join(cmd)}  (in {args.work}, output in {log})", flush=True)
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            done = subprocess.run(cmd, cwd=args.work, env=harness_env(args.engine), stdout=out,
                                  stderr=subprocess.STDOUT, timeout=args.timeout + 600)
        except subprocess.TimeoutExpired:
            sys.exit(f"run_harness: the harness did not finish within {args.timeout + 600} s")
    wall = time.monotonic() - start
    if done.returncode != 0:
        print(log.read_text()[-4000:])
        sys.exit(f"run_harness: the harness exited {done.returncode}")
    return wall


def ratio(part):
    """swebench's compute_fail_to_pass / compute_pass_to_pass: 1 when there is no test."""
    total = len(part["success"]) + len(part["failure"])
    return 1 if total == 0 else len(part["success"]) / total


def resolution(tests_status):
    """swebench's get_resolution_status, from report.json's tests_status."""
    f2p, p2p = ratio(tests_status["FAIL_TO_PASS"]), ratio(tests_status["PASS_TO_PASS"])
    if f2p == 1 and p2p == 1:
        return "RESOLVED_FULL"
    if 0 < f2p < 1 and p2p == 1:
        return "RESOLVED_PARTIAL"
    return "RESOLVED_NO"


def read(path):
    return path.read_text(errors="replace") if path.exists() else ""


def applied_with(instance_log):
    """Which command of the chain applied the patch (its index, or "reverse"), else None."""
    if ALREADY_APPLIED in instance_log:
        return "reverse"
    if APPLIED not in instance_log:
        return None
    return instance_log.count(APPLY_FAILED)


def verdict(log_dir, instance_id, prediction):
    """(verdict, the chain's command that applied the patch, a note) from the harness's files."""
    instance_log = read(log_dir / "run_instance.log")
    apply = applied_with(instance_log)
    if prediction["model_patch"] in ("", None):
        return ("EMPTY_PATCH" if not log_dir.exists() else "RAN_EMPTY_PATCH"), apply, ""
    report_path = log_dir / "report.json"
    if report_path.exists():
        report = json.loads(report_path.read_text())[instance_id]
        if not report["patch_successfully_applied"]:
            return "INVALID_LOG", apply, ""
        status = resolution(report["tests_status"])
        if report["resolved"] != (status == "RESOLVED_FULL"):
            return status, apply, f"but resolved is {report['resolved']}"
        return status, apply, ""
    if APPLY_FAIL in instance_log:
        return "ERROR_PATCH_APPLY", apply, ""
    if TIMED_OUT in read(log_dir / "test_output.txt"):
        return "ERROR_TIMEOUT", apply, ""
    return "ERROR", apply, "no report.json"


def diff_changes(run_dir):
    """A problem for each instance whose git diff the harness found changed by the eval script,
    with the two diffs it logged."""
    problems = []
    for log in sorted(run_dir.glob("*/*/run_instance.log")):
        text = read(log)
        if DIFF_CHANGED not in text:
            continue
        before, after = (LOG_LINE.split(text.partition(f"Git diff {when}:\n")[2])[0]
                         for when in ("before", "after"))
        problems.append(f"{log.parent.name}: {DIFF_CHANGED}\n--- before\n{before}\n--- after\n"
                        f"{after}")
    return problems


def check_run_report(path, expected):
    """The harness's summary must put each instance in the list its verdict implies."""
    report = json.loads(path.read_text())
    want = {
        "resolved_ids": {"RESOLVED_FULL"},
        "unresolved_ids": {"RESOLVED_PARTIAL", "RESOLVED_NO", "INVALID_LOG"},
        "empty_patch_ids": {"EMPTY_PATCH"},
        "error_ids": {"ERROR_PATCH_APPLY", "ERROR_TIMEOUT"},
    }
    problems = []
    for key, verdicts in want.items():
        ids = sorted(i for i, e in expected.items() if e["verdict"] in verdicts)
        if sorted(report[key]) != ids:
            problems.append(f"{key} is {sorted(report[key])}, expected {ids}")
    if report.get("unstopped_containers"):
        problems.append(f"containers left behind: {report['unstopped_containers']}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["docker", "podman"], default="docker")
    parser.add_argument("--python", type=Path, default=DEFAULT_PYTHON,
                        help="the Python of the swebench 5.0.2 environment")
    parser.add_argument("--run-id", default="rex-check")
    parser.add_argument("--max-workers", type=int, default=4)
    # Every instance but the hanging one finishes in a few seconds.
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("work", type=Path)
    args = parser.parse_args()
    args.dataset, args.work = args.dataset.resolve(), args.work.resolve()

    expected = json.loads((args.dataset / "expected.json").read_text())
    predictions = {}
    for line in (args.dataset / "predictions.jsonl").read_text().splitlines():
        prediction = json.loads(line)
        predictions[prediction["instance_id"]] = prediction
    model_dir = next(iter(predictions.values()))["model_name_or_path"].replace("/", "__")

    # A run of the same id would skip every instance that has a report already.
    run_dir = args.work / "logs" / "run_evaluation" / args.run_id
    report_dir = args.work / "reports"
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(report_dir, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    wall = run_harness(args, args.run_id, report_dir)

    rows, failures = [], 0
    for instance_id, want in expected.items():
        got, apply, note = verdict(run_dir / model_dir / instance_id, instance_id,
                                   predictions[instance_id])
        ok = got == want["verdict"] and apply == want["apply"]
        failures += not ok
        rows.append((instance_id, want["verdict"], got, str(want["apply"]), str(apply),
                     "ok" if ok else "MISMATCH " + note))
    header = ("instance", "expected", "harness", "apply", "applied", "")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())

    run_report = report_dir / f"{model_dir}.{args.run_id}.json"
    problems = check_run_report(run_report, expected) if run_report.exists() else [
        f"no run report at {run_report}"]
    problems += diff_changes(run_dir)
    for problem in problems:
        print(f"run report: {problem}")
    print(f"run_harness: {args.engine}, {len(rows)} instances, the harness took {wall:.1f} s; "
          f"{failures} verdict(s) wrong, {len(problems)} run report problem(s)")
    sys.exit(1 if failures or problems else 0)


if __name__ == "__main__":
    main()
