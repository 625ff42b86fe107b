#!/usr/bin/env python3
"""`rex swebench` refuses bad input before anything starts: each case exits 2, names the file,
the line (or item) and the field, and leaves no logs/ behind.

    test_input_errors.py REX
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REX = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else "rex"

GOOD = {
    "instance_id": "demo__calc-1",
    "repo": "demo/calc",
    "version": "1.0",
    "base_commit": "0" * 40,
    "patch": "diff --git a/a b/a\n",
    "test_patch": "",
    "FAIL_TO_PASS": ["test_a"],
    "PASS_TO_PASS": "[\"test_b\"]",
    "image": "rex-swebench-test/none:latest",
    "eval_script": "#!/bin/bash\nset -uxo pipefail\n: '>>>>> Start Test Output'\ntrue\n"
                   ": '>>>>> End Test Output'\n",
    "log_parser": "parse_log_pytest",
    "eval_type": "pass_and_fail",
}


class InputErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="rex-swebench-input-")
        self.cwd = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.cwd, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def jsonl(self, name, records):
        return self.write(name, "".join(
            (r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))

    def rex(self, *args):
        return subprocess.run([REX, "swebench", *args], cwd=self.cwd, capture_output=True,
                              text=True, timeout=60)

    def refused(self, dataset, predictions, *expected, extra=()):
        r = self.rex("--dataset_name", dataset, "--predictions_path", predictions,
                     "-id", "input-test", *extra)
        self.assertEqual(r.returncode, 2, f"exit status\nstdout: {r.stdout}\nstderr: {r.stderr}")
        for text in expected:
            self.assertIn(text, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.cwd, "logs")),
                         "logs/ exists: something started")
        return r.stderr

    def predictions(self, *ids, patch="diff"):
        return self.jsonl("preds.jsonl", [
            {"instance_id": i, "model_name_or_path": "m", "model_patch": patch} for i in ids])

    def test_malformed_dataset_line(self):
        data = self.jsonl("data.jsonl", [GOOD, '{"instance_id": "x", '])
        self.refused(data, self.predictions("demo__calc-1"), "data.jsonl:2: not JSON")

    def test_malformed_predictions_line(self):
        data = self.jsonl("data.jsonl", [GOOD])
        preds = self.jsonl("preds.jsonl", ["[1, 2", {"instance_id": "demo__calc-1"}])
        self.refused(data, preds, "preds.jsonl:1: not JSON",
                     "preds.jsonl:2: model_name_or_path: missing")

    def test_missing_field_names_what_to_do(self):
        old = dict(GOOD)
        del old["eval_script"]
        del old["log_parser"]
        data = self.jsonl("data.jsonl", [old])
        self.refused(data, self.predictions("demo__calc-1"),
                           "data.jsonl:1 (demo__calc-1): eval_script: missing",
                           "data.jsonl:1 (demo__calc-1): log_parser: missing", "4.x")

    def test_wrong_type(self):
        bad = dict(GOOD, FAIL_TO_PASS=3, version=2.0)
        data = self.jsonl("data.jsonl", [bad])
        self.refused(data, self.predictions("demo__calc-1"),
                     "FAIL_TO_PASS: expected a list of test names, got a number",
                     "version: expected a string, got a number")

    def test_unknown_parser(self):
        data = self.jsonl("data.jsonl", [dict(GOOD, log_parser="parse_log_nose")])
        self.refused(data, self.predictions("demo__calc-1"),
                     "log_parser: unknown parser \"parse_log_nose\"")

    def test_unknown_eval_type(self):
        data = self.jsonl("data.jsonl", [dict(GOOD, eval_type="fail_and_pass")])
        self.refused(data, self.predictions("demo__calc-1"), "eval_type: expected")

    def test_duplicate_instance_id(self):
        data = self.jsonl("data.jsonl", [GOOD, GOOD])
        self.refused(data, self.predictions("demo__calc-1"),
                     "data.jsonl:2", "is already used at data.jsonl:1")

    def test_duplicate_prediction(self):
        data = self.jsonl("data.jsonl", [GOOD])
        self.refused(data, self.predictions("demo__calc-1", "demo__calc-1"),
                     "preds.jsonl:2: a second prediction for \"demo__calc-1\"")

    def test_prediction_for_unknown_instance(self):
        data = self.jsonl("data.jsonl", [GOOD])
        self.refused(data, self.predictions("demo__calc-2"),
                     "instance_id \"demo__calc-2\" is not in the dataset")

    def test_unknown_instance_ids_flag(self):
        data = self.jsonl("data.jsonl", [GOOD])
        self.refused(data, self.predictions("demo__calc-1"),
                     "--instance_ids: \"nope\" is not in the dataset",
                     extra=("--instance_ids", "nope"))

    def test_hugging_face_name_and_parquet(self):
        preds = self.predictions("demo__calc-1")
        self.refused("SWE-bench/SWE-bench_Lite", preds, "export", "JSON lines")
        self.refused(self.write("d.parquet", ""), preds, "parquet", "read_parquet")

    def test_predictions_kinds(self):
        data = self.jsonl("data.jsonl", [GOOD])
        self.refused(data, self.write("p.txt", ""), "must be a .json or .jsonl file")
        self.refused(data, self.write("p.json", "3"), "expected a list or an object")
        self.refused(data, self.write("p.json", "[{\"instance_id\": \"demo__calc-1\", "
                                      "\"model_name_or_path\": \"m\", \"model_patch\": 4}]"),
                     "model_patch: expected a string or null, got a number")

    def test_boolean_flags(self):
        data = self.jsonl("data.jsonl", [GOOD])
        self.refused(data, self.predictions("demo__calc-1"), "take a boolean",
                     extra=("--rewrite_reports", "perhaps"))

    def test_many_problems_all_reported(self):
        data = self.jsonl("data.jsonl", [dict(GOOD, instance_id=f"i{n}", log_parser="x")
                                         for n in range(3)])
        err = self.refused(data, self.predictions("i0"), "data.jsonl:1 (i0)", "data.jsonl:3 (i2)")
        self.assertEqual(err.count("unknown parser"), 3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
