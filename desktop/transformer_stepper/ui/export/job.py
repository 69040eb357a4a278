"""Exporting many figures without freezing the GUI.

Qt paints only on the GUI thread, so the figures are rendered there, one per event-loop turn;
a layer's detail (its q, k, v, scores ..., 0.1-0.5 s on a GPT-2-small-sized model) is computed
in a worker before its views are drawn, and PNG encoding, SVG tidying and the atomic file
writes run in another: jobs on the WorkerPool (the window's, beside tracing; the writes in a
lane of their own). The order of it all, the bound on rendered figures waiting (memory stays
bounded at 4x), cancel and the end are state/export_run.py's, tested without Qt; this QObject
draws the figures and turns the run's events into signals. The same job serves the File menu
(with a progress dialog) and the headless command (`run()` spins an event loop until done).

    job = ExportJob(SnapshotSession.of(session), folder, ["softmax"], ExportOptions("svg"))
    job.fileWritten.connect(print)
    job.run()           # or job.start() and wait for finished / failed / cancelled
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from PySide6.QtCore import QCoreApplication, QEventLoop, QObject, Signal
from PySide6.QtWidgets import QWidget

from ...core.model import stages
from ...core.model.errors import ModelError
from ...core.model.interventions import describe_all
from ...io.array_export import write_bytes
from ...io.export_formats import figure_format
from ...state.export_run import Detail, ExportRun, Write
from ..collector import collect
from ..stages import create_view
from ..workers import WorkerPool
from . import metadata
from .render import ExportOptions, Rendered, encode, plot_file_name, render
from .snapshot import SnapshotSession

STEPS_PER_UNIT = 100        # progress resolution inside one (stage, layer, head)


@dataclass(frozen=True)
class Unit:
    """One stage view drawn at one layer and head: its plots are files."""
    stage: stages.Stage
    layer: int
    head: int


def plan(session: SnapshotSession, stage_keys: Sequence[str],
         all_layers_heads: bool = False) -> tuple[list[Unit], list[str]]:
    """-> (what to draw, in stepping order; a note for each requested stage that does not apply).
    A stage is drawn at every layer (and head) only where it depends on them."""
    config = session.model.config
    wanted = set(stage_keys)
    layers = range(config.n_layer) if all_layers_heads else [session.layer]
    heads = range(config.n_head) if all_layers_heads else [session.head]
    units, notes = [], []
    for stage in stages.STAGES:
        if stage.key not in wanted:
            continue
        reason = stage.unavailable_because(config)
        if reason and stage.needs_experts:      # a stage the model's list does not have
            continue
        if reason:
            notes.append(f"skipped {stage.number:02d}-{stage.key}: {config.name or 'this model'} {reason}")
            continue
        if stage.per_head:
            combos = list(itertools.product(layers, heads))
        elif stage.per_layer:
            combos = [(layer, session.head) for layer in layers]
        else:
            combos = [(session.layer, session.head)]
        units.extend(Unit(stage, layer, head) for layer, head in combos)
    return units, notes


def existing_exports(folder: Path, stage_keys: Sequence[str], file_format: str, config=None) -> list[Path]:
    """Files an export of these stages may replace (`NN-stage-….png` already in the folder;
    NN numbered for `config`'s model: Stage.number_for)."""
    if not folder.is_dir():
        return []
    prefixes = tuple(f"{stages.stage(k).number_for(config):02d}-{k}-" for k in stage_keys)
    return sorted(p for p in folder.iterdir()
                  if p.name.startswith(prefixes) and p.suffix == figure_format(file_format).extension)


def encode_and_write(path: Path, rendered: Rendered, facts: Optional[dict] = None,
                     caption: bool = False) -> tuple[str, bool]:
    """Worker side: encode, add the figure's facts (metadata.py; with `caption`, a line under
    the figure too) and write atomically. -> (path, replaced an existing file)."""
    line = metadata.caption_line(facts) if caption and facts else None
    return str(path), write_bytes(path, encode(rendered, facts, line))


class ExportJob(QObject):
    progressed = Signal(int, int, str)     # done, total (STEPS_PER_UNIT per unit), file name
    fileWritten = Signal(str, bool)        # path, it replaced an existing file
    finished = Signal()                    # every file written
    failed = Signal(str)                   # one line naming the file; files before it stay
    cancelled = Signal()

    def __init__(self, session: SnapshotSession, folder: Path, stage_keys: Sequence[str],
                 options: ExportOptions, all_layers_heads: bool = False,
                 parent: Optional[QObject] = None, max_pending: int = 3,
                 workers: Optional[WorkerPool] = None) -> None:
        """`workers`: the pool its jobs run on (the window's); else one of its own (headless)."""
        super().__init__(parent)
        self.session = session
        self.folder = Path(folder)
        self.options = options
        self.units, self.notes = plan(session, stage_keys, all_layers_heads)
        self.problems: list[str] = []      # views that could not be drawn (and why)
        self.total = len(self.units) * STEPS_PER_UNIT
        self.caption = False               # a line under each figure saying where it came from
        self.only_figures: Optional[frozenset] = None    # figure names to write (None: every one)
        self.figure_names: list[str] = []  # the names of the figures met, for a message
        self.workers = workers if workers is not None else WorkerPool(max_threads=1)
        self.runner = ExportRun(self.workers, self._run_steps, encode_and_write,
                              session.trace.prepare, max_pending, release=self._release)
        events = self.runner.events
        events.progressed.connect(self.progressed.emit)
        events.fileWritten.connect(self.fileWritten.emit)
        for name in ("finished", "failed", "cancelled"):
            getattr(events, name).connect(getattr(self, f"_{name}"))
        self._host: Optional[QWidget] = None
        self._views: list = []

    # the run's account
    state = property(lambda self: self.runner.state)            # idle, running, done, failed, cancelled
    written = property(lambda self: self.runner.written)
    replaced = property(lambda self: self.runner.replaced)
    error = property(lambda self: self.runner.error)
    interrupted = property(lambda self: self.runner.interrupted)   # Ctrl-C: run() raises

    # -- control ------------------------------------------------------------------------
    def start(self) -> None:
        # The cyclic garbage collector stays on (it used to be turned off here: a collection
        # that finalised views caught in a reference cycle, through their provenance click
        # hooks, deadlocked about one export in ten; the views no longer make that cycle:
        # StageView.add_figure/close, and tests/ui/test_gc_stress.py)
        if self.state == "idle":
            self._host = QWidget()         # never shown: the views only lay out and paint
            QCoreApplication.instance().aboutToQuit.connect(self.cancel)   # quitting mid-export
        self.runner.start()

    def run(self) -> list[Path]:
        """Start and spin an event loop until done (headless use). -> the files written;
        a ModelError if a file could not be written."""
        loop = QEventLoop()
        for signal in (self.finished, self.failed, self.cancelled):
            signal.connect(loop.quit)
        self.start()
        if self.state == "running":
            loop.exec()
        if self.interrupted:
            raise KeyboardInterrupt
        if self.state == "failed":
            raise ModelError(self.error)
        return self.written

    def cancel(self) -> None:
        """Stop before the next figure; the figures drawn are still written."""
        self.runner.cancel()

    def _finished(self) -> None:
        self.finished.emit()

    def _failed(self, message: str) -> None:
        self.failed.emit(message)

    def _cancelled(self) -> None:
        self.cancelled.emit()

    # -- the steps (GUI thread) -------------------------------------------------------------
    def _run_steps(self, report) -> Iterator[Optional[object]]:
        """One figure a step (ExportRun drives it): yields a Write after drawing each figure, a
        Detail before the views read a layer not computed yet."""
        options, session = self.options, self.session
        model = session.model
        view, view_key = None, None
        for index, unit in enumerate(self.units):
            if unit.stage.per_layer and not session.trace.is_ready(unit.layer):
                yield Detail(unit.layer)                    # before a new view reads it
            session.set_layer(unit.layer)                   # (a new view reads the layer set)
            session.set_head(unit.head)
            if unit.stage.key != view_key:
                if view is not None:
                    self._close_view(view)
                view = create_view(unit.stage.key, session, self._host)
                self._views.append(view)
                view_key = unit.stage.key
                report(index * STEPS_PER_UNIT, self.total, unit.stage.title)
                yield None
            plots = view.plots()
            problem = getattr(view, "_problem", None)
            if problem:                       # said, never skipped in silence
                self.problems.append(f"{unit.stage.number:02d}-{unit.stage.key}: not drawn: {problem}")
            for k, (name, item) in enumerate(plots):
                if name not in self.figure_names:
                    self.figure_names.append(name)
                if self.only_figures is not None and name not in self.only_figures:
                    continue
                path = self.folder / plot_file_name(unit.stage, name, unit.layer, unit.head, options.format,
                                                    model.config)
                report(index * STEPS_PER_UNIT + k * STEPS_PER_UNIT // len(plots), self.total, path.name)
                where = f"layer {unit.layer}, head {unit.head}" if unit.stage.per_head else \
                    f"layer {unit.layer}" if unit.stage.per_layer else ""
                title = f"{unit.stage.number_for(model.config)}. {unit.stage.title}: {name}" + (f" ({where})" if where else "")
                description = f"Transformer Stepper · {model.name} · {session.trace.text!r}"
                if session.trace.interventions:       # the intervened pass, as the stepper showed it
                    description += f" · intervened: {describe_all(session.trace.interventions)}"
                facts = metadata.figure_facts(model, session.trace, unit.stage.key, unit.layer, unit.head,
                                              session.selected_token)
                yield Write(path, (render(item, options, title, description), facts, self.caption))
        if view is not None:
            self._close_view(view)
        report(self.total, self.total, "")

    # -- ending -------------------------------------------------------------------------------
    def _release(self, stepping: bool) -> None:
        """The run ended: free the views (`stepping`: the step under way still holds one)."""
        for view in list(self._views):
            self._close_view(view)
        if self._host is not None:
            if stepping:
                self._host.deleteLater()
            self._host = None              # parentless and Python-owned: deleted now
        try:
            QCoreApplication.instance().aboutToQuit.disconnect(self.cancel)
        except (RuntimeError, TypeError, RuntimeWarning):
            pass

    def _close_view(self, view) -> None:
        if view in self._views:
            self._views.remove(view)
        view.close()
        view.deleteLater()
        if not self.runner.writing:
            # free the closed views now, between writes: their Qt objects first (collector.py)
            collect()
