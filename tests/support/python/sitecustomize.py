"""Skip reporting for the Python test suites (CTest puts this folder on PYTHONPATH).

When REX_SKIP_REPORT names a file, every unittest test that skips, and every pytest test (the
plugin below, loaded through PYTEST_PLUGINS), appends one line to it:
"python<TAB>module.Class.test<TAB>reason". A script whose tests all skipped still exits 0, so
CTest alone would call it passed; tests/check_skips.py reads the file against
tests/allowed_skips.txt. Without REX_SKIP_REPORT nothing is changed.
"""

import os

_REPORT = os.environ.get("REX_SKIP_REPORT")


def _one_line(text):
    return " ".join(str(text).split())


def record_skip(test_id, reason):
    """Appends one skip to the report (one write with O_APPEND: lines stay whole)."""
    if not _REPORT:
        return
    line = f"python\t{test_id}\t{_one_line(reason)}\n".encode("utf-8", "replace")
    fd = os.open(_REPORT, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _test_id(test):
    # unittest's id() is "__main__.Class.test" for a script run directly: name the script instead.
    test_id = test.id()
    if test_id.startswith("__main__."):
        import sys

        script = os.path.splitext(os.path.basename(sys.argv[0] or "__main__"))[0]
        test_id = script + test_id[len("__main__"):]
    return test_id


if _REPORT:
    import unittest

    _add_skip = unittest.TestResult.addSkip

    def _add_skip_and_record(self, test, reason):
        record_skip(_test_id(test), reason)
        return _add_skip(self, test, reason)

    unittest.TestResult.addSkip = _add_skip_and_record
