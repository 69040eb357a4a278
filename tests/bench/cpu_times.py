"""A pytest plugin that measures each test's CPU seconds beside its wall seconds: on a shared,
loaded machine the wall clock says more about the neighbours than about the test, the CPU time
(this process's threads and the subprocesses it waited for, setup to teardown) does not.

    python -m pytest -q -p no:cacheprovider -p tests.bench.cpu_times tests/ui
    TS_CPU_TIMES=ui.tsv python -m pytest ... -p tests.bench.cpu_times tests/ui   # every test, as it ends

At the end it prints the session's CPU and wall seconds, the CPU spent before the first test
(collection), and the 30 tests (TS_CPU_TOP) that took most CPU. A figure, not a test."""
from __future__ import annotations

import os
import resource
import time

import pytest

_rows: dict[str, tuple[float, float]] = {}
_start: dict[str, float] = {}


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_sessionstart(session) -> None:
    _start["wall"], _start["cpu"] = time.perf_counter(), _cpu()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    wall, cpu = time.perf_counter(), _cpu()
    if "first" not in _start:
        _start["first"] = cpu
    yield
    row = _rows[item.nodeid] = (_cpu() - cpu, time.perf_counter() - wall)
    out = os.environ.get("TS_CPU_TIMES")
    if out:
        with open(out, "a", encoding="utf-8") as file:
            file.write(f"{row[0]:.2f}\t{row[1]:.2f}\t{item.nodeid}\n")


def pytest_terminal_summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    cpu, wall = _cpu() - _start.get("cpu", 0.0), time.perf_counter() - _start.get("wall", 0.0)
    before = _start.get("first", _cpu()) - _start.get("cpu", 0.0)
    write(f"CPU {cpu:.1f} s, wall {wall:.1f} s (load {os.getloadavg()[0]:.1f}); "
          f"{before:.1f} s CPU before the first test; {len(_rows)} tests")
    for nodeid, (test_cpu, test_wall) in sorted(_rows.items(), key=lambda kv: -kv[1][0])[
            :int(os.environ.get("TS_CPU_TOP", "30"))]:
        write(f"{test_cpu:8.2f} s CPU {test_wall:8.2f} s wall  {nodeid}")
