"""pytest's half of the skip report (sitecustomize.py has the rest); loaded by PYTEST_PLUGINS."""

import sitecustomize


def pytest_runtest_logreport(report):
    # A skip is reported once, by the phase that skipped (usually setup).
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        sitecustomize.record_skip(report.nodeid, reason)
