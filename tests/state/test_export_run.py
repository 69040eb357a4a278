"""An export's run (state/export_run.py) on the ManualScheduler, no Qt: one figure a turn, at
most max_pending drawn figures waiting for their writes, a layer's detail computed in a job
before the steps that read it, cancel stopping before the next figure with the drawn ones
still written, and failures said once."""
from __future__ import annotations

from pathlib import Path

import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.state.export_run import Detail, ExportRun, Write
from transformer_stepper.state.scheduler import ManualScheduler


class Figures:
    """Steps that 'draw' n figures (bytes), one a turn, asking for a layer's detail first
    where `layers` says so; they note what they drew and whether they were closed."""

    def __init__(self, folder: Path, n: int, layers: dict[int, int] = {}) -> None:
        self.folder, self.n, self.layers = folder, n, layers
        self.drawn: list[int] = []
        self.closed = False
        self.computed: list[int] = []
        self.ready: set[int] = set()

    def steps(self, report):
        try:
            for index in range(self.n):
                layer = self.layers.get(index)
                if layer is not None and layer not in self.ready:
                    yield Detail(layer)
                    assert layer in self.ready, "the steps went on before the layer was in"
                report(index, self.n, f"figure-{index}")
                self.drawn.append(index)
                yield Write(self.folder / f"figure-{index}.bin", (bytes([index]) * 10,))
            report(self.n, self.n, "")
        finally:
            self.closed = True

    def compute(self, layer: int) -> None:
        self.computed.append(layer)
        self.ready.add(layer)


def write(path: Path, data: bytes) -> tuple[str, bool]:
    if path.name == "figure-3.bin" and getattr(write, "fail", False):
        raise ModelError(f"{path}: the disk is full")
    replaced = path.exists()
    path.write_bytes(data)
    return str(path), replaced


def make(tmp_path, n=5, layers={}, max_pending=3):
    scheduler, figures = ManualScheduler(), Figures(tmp_path, n, layers)
    released = []
    run = ExportRun(scheduler, figures.steps, write, figures.compute, max_pending, release=released.append)
    log = []
    for name in ("progressed", "fileWritten", "finished", "failed", "cancelled"):
        getattr(run.events, name).connect(lambda *args, name=name: log.append((name,) + args))
    run.released = released
    return scheduler, figures, run, log


def turn(scheduler: ManualScheduler) -> None:
    scheduler.advance(0)                 # one turn of the event loop: the zero-delay timer


def until_ended(scheduler, run) -> None:
    while run.state == "running":
        if any(timer.isActive() for timer in scheduler.timers):
            turn(scheduler)
        else:
            scheduler.run_next()


def test_every_figure_is_drawn_one_a_turn_and_written_in_order(tmp_path):
    scheduler, figures, run, log = make(tmp_path)
    run.start()
    turn(scheduler)
    assert figures.drawn == [0] and len(scheduler.jobs) == 1          # its write: a job
    assert scheduler.jobs[0][0].lane == "export"
    until_ended(scheduler, run)
    assert run.state == "done" and figures.closed and run.released == [False]
    assert [p.name for p in run.written] == [f"figure-{i}.bin" for i in range(5)]
    assert (tmp_path / "figure-4.bin").read_bytes() == bytes([4]) * 10
    progress = [entry[1:] for entry in log if entry[0] == "progressed"]
    assert progress == [(i, 5, f"figure-{i}") for i in range(5)] + [(5, 5, "")]
    assert [entry[0] for entry in log if entry[0] != "progressed"] == ["fileWritten"] * 5 + ["finished"]


def test_at_most_max_pending_drawn_figures_wait_for_their_writes(tmp_path):
    scheduler, figures, run, _ = make(tmp_path, max_pending=2)
    run.start()
    for _ in range(6):
        turn(scheduler)
    assert figures.drawn == [0, 1] and len(scheduler.jobs) == 2       # held: no timer running
    assert not any(timer.isActive() for timer in scheduler.timers)
    scheduler.run_next()                                             # a write done: it goes on
    turn(scheduler)
    assert figures.drawn == [0, 1, 2]


def test_cancel_stops_before_the_next_figure_and_the_drawn_ones_are_written(tmp_path):
    scheduler, figures, run, log = make(tmp_path)
    run.start()
    turn(scheduler)
    turn(scheduler)
    assert figures.drawn == [0, 1] and len(scheduler.jobs) == 2       # two writes not yet run
    run.cancel()
    assert run.state == "cancelled" and figures.closed and run.released == [False]
    for _ in range(3):
        turn(scheduler)
    assert figures.drawn == [0, 1]                                   # no figure after the cancel
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure-0.bin", "figure-1.bin"]
    assert [p.name for p in run.written] == ["figure-0.bin", "figure-1.bin"]
    assert [entry[0] for entry in log if entry[0] != "progressed"] == ["fileWritten"] * 2 + ["cancelled"]
    run.cancel()                                                     # once only
    assert log.count(("cancelled",)) == 1


def test_a_layer_is_computed_in_a_job_before_the_steps_that_read_it(tmp_path):
    scheduler, figures, run, _ = make(tmp_path, n=3, layers={1: 4, 2: 4})
    run.start()
    turn(scheduler)                                  # figure 0
    turn(scheduler)                                  # figure 1 needs layer 4: a job, steps held
    assert figures.drawn == [0] and figures.computed == []
    compute = [job for job, *_ in scheduler.jobs if job.lane == ""]
    assert len(compute) == 1 and not any(t.isActive() for t in scheduler.timers)
    turn(scheduler)
    assert figures.drawn == [0]                      # still held
    scheduler.wait_for(compute[0])                   # the layer is in: the steps go on
    until_ended(scheduler, run)
    assert figures.computed == [4] and figures.drawn == [0, 1, 2] and run.state == "done"


def test_a_failed_write_ends_the_run_once_and_the_files_before_it_stay(tmp_path, monkeypatch):
    monkeypatch.setattr(write, "fail", True, raising=False)
    scheduler, figures, run, log = make(tmp_path, max_pending=1)
    run.start()
    until_ended(scheduler, run)
    assert run.state == "failed" and "figure-3.bin: the disk is full" in run.error
    assert [p.name for p in run.written] == [f"figure-{i}.bin" for i in range(3)]
    assert figures.drawn == [0, 1, 2, 3] and figures.closed
    assert [entry for entry in log if entry[0] in ("failed", "finished", "cancelled")] == [("failed", run.error)]


def test_a_bug_in_a_step_is_said_not_raised(tmp_path, monkeypatch):
    import traceback
    monkeypatch.setattr(traceback, "print_exc", lambda: None)
    scheduler, figures, run, log = make(tmp_path)

    def broken(report):
        yield Write(tmp_path / "first.bin", (b"1",))
        raise ZeroDivisionError("boom")

    run._make_steps = broken
    run.start()
    until_ended(scheduler, run)
    assert run.state == "failed" and run.error == "rendering failed: ZeroDivisionError: boom"
    assert [p.name for p in run.written] == ["first.bin"]           # the figure drawn before it
    with pytest.raises(RuntimeError):
        run.start()                                                  # a run runs once


def test_a_run_that_ends_during_a_step_reports_and_writes_nothing_more(tmp_path, monkeypatch):
    """A modal progress dialog runs the event loop inside a progress report: a write can fail
    there, in the middle of a step. The step stops at the report: nothing more is drawn,
    written or reported (the dialog is gone), and the steps are closed."""
    monkeypatch.setattr(write, "fail", True, raising=False)
    scheduler, figures, run, log = make(tmp_path, max_pending=5)

    def event_loop_inside_the_report(done, total, name):
        if name == "figure-4":
            scheduler.run_all()                  # figure 3's write fails in here
    run.events.progressed.connect(event_loop_inside_the_report)
    run.start()
    for _ in range(4):
        turn(scheduler)                          # figures 0-3 drawn, their writes queued
    assert figures.drawn == [0, 1, 2, 3] and len(scheduler.jobs) == 4
    turn(scheduler)                              # figure 4: the failure lands in its report
    assert run.state == "failed" and "figure-3.bin" in run.error
    assert figures.drawn == [0, 1, 2, 3] and figures.closed      # figure 4 not drawn
    assert scheduler.jobs == []
    assert [p.name for p in run.written] == [f"figure-{i}.bin" for i in range(3)]
    reported = [entry[3] for entry in log if entry[0] == "progressed"]
    assert reported == [f"figure-{i}" for i in range(5)]          # and no final report
    assert [entry[0] for entry in log if entry[0] in ("failed", "finished", "cancelled")] == ["failed"]
