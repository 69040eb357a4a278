"""Exporting many figures without freezing the GUI.

Qt paints only on the GUI thread, so the figures are rendered there, one per event-loop turn
(a generator driven by a zero-interval QTimer); a layer's detail (its q, k, v, scores ...,
0.1-0.5 s on a GPT-2-small-sized model) is computed in a worker before its views are drawn,
and PNG encoding, SVG tidying and the atomic file writes run in another. At most `max_pending` rendered figures wait for the worker, so memory
stays bounded at 4x. The same job serves the File menu (with a progress dialog) and the
headless command (`run()` spins an event loop until it is done).

    job = ExportJob(SnapshotSession.of(session), folder, ["softmax"], ExportOptions("svg"))
    job.fileWritten.connect(print)
    job.run()           # or job.start() and wait for finished / failed / cancelled
"""
from __future__ import annotations

import itertools
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from PySide6.QtCore import QCoreApplication, QEventLoop, QObject, QThreadPool, QTimer, Signal
from PySide6.QtWidgets import QWidget

from ...core import stages
from ...core.errors import ModelError
from ...core.interventions import describe_all
from ...io.array_export import write_bytes
from ..collector import collect
from ..stages import create_view
from ..workers import Task
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


def existing_exports(folder: Path, stage_keys: Sequence[str], file_format: str) -> list[Path]:
    """Files an export of these stages may replace (`NN-stage-….png` already in the folder)."""
    if not folder.is_dir():
        return []
    prefixes = tuple(f"{stages.stage(k).number:02d}-{k}-" for k in stage_keys)
    return sorted(p for p in folder.iterdir()
                  if p.name.startswith(prefixes) and p.suffix == f".{file_format}")


def _encode_and_write(path: Path, rendered: Rendered, facts: Optional[dict] = None,
                      caption: bool = False) -> tuple[str, bool]:
    """Worker side: encode, add the figure's facts (metadata.py; with `caption`, a line under
    the figure too) and write atomically. -> (path, replaced an existing file)."""
    if caption and facts:
        line = metadata.caption_line(facts)
        if rendered.image is not None:
            rendered = Rendered(image=metadata.captioned_image(rendered.image, line))
        else:
            return str(path), write_bytes(path, metadata.svg_with_metadata(encode(rendered), facts, line))
    return str(path), write_bytes(path, metadata.with_facts(encode(rendered), facts))


class ExportJob(QObject):
    progressed = Signal(int, int, str)     # done, total (STEPS_PER_UNIT per unit), file name
    fileWritten = Signal(str, bool)        # path, it replaced an existing file
    finished = Signal()                    # every file written
    failed = Signal(str)                   # one line naming the file; files before it stay
    cancelled = Signal()

    def __init__(self, session: SnapshotSession, folder: Path, stage_keys: Sequence[str],
                 options: ExportOptions, all_layers_heads: bool = False,
                 parent: Optional[QObject] = None, max_pending: int = 3) -> None:
        super().__init__(parent)
        self.session = session
        self.folder = Path(folder)
        self.options = options
        self.units, self.notes = plan(session, stage_keys, all_layers_heads)
        self.problems: list[str] = []      # views that could not be drawn (and why)
        self.total = len(self.units) * STEPS_PER_UNIT
        self.max_pending = max_pending
        self.caption = False               # a line under each figure saying where it came from
        self.written: list[Path] = []
        self.replaced: list[Path] = []
        self.error: Optional[str] = None
        self.interrupted = False           # Ctrl-C while running (run() raises KeyboardInterrupt)
        self.state = "idle"                # running, done, failed, cancelled
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)    # the GUI thread renders, one worker encodes/writes
        self._pool.setExpiryTimeout(2000)
        self._compute_pool = QThreadPool(self)   # a layer's detail, one at a time
        self._compute_pool.setMaxThreadCount(1)
        self._compute_pool.setExpiryTimeout(2000)
        self._computing: dict[int, Task] = {}      # layer -> its detail being computed
        self._waiting: Optional[int] = None        # the layer the steps wait for
        self._computed_tasks: list[Task] = []
        self._tasks: dict[int, Task] = {}
        self._completed: list[tuple[int, tuple[str, bool]]] = []
        self._delivered: set[int] = set()
        self._ids = itertools.count()
        self._host: Optional[QWidget] = None
        self._views: list = []
        self._steps: Optional[Iterator] = None
        self._steps_done = False
        self._stepping = False
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._tick)

    # -- control ------------------------------------------------------------------------
    def start(self) -> None:
        if self.state != "idle":
            raise RuntimeError("an export job runs once")
        self.state = "running"
        # The cyclic garbage collector stays on (it used to be turned off here: a collection
        # that finalised views caught in a reference cycle, through their provenance click
        # hooks, deadlocked about one export in ten; the views no longer make that cycle:
        # StageView.add_figure/close, and tests/ui/test_gc_stress.py)
        self._host = QWidget()             # never shown: the views only lay out and paint
        self._steps = self._run_steps()
        QCoreApplication.instance().aboutToQuit.connect(self.cancel)   # quitting mid-export
        self._timer.start()

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
        if self.state != "running":
            return
        self.state = "cancelled"
        self._stop()
        self.cancelled.emit()

    # -- the steps (GUI thread) -------------------------------------------------------------
    def _run_steps(self) -> Iterator[None]:
        options, session = self.options, self.session
        model = session.model
        view, view_key = None, None
        for index, unit in enumerate(self.units):
            if unit.stage.per_layer and not session.trace.is_ready(unit.layer):
                yield from self._detail_of(unit.layer)     # before a new view reads it
            session.set_layer(unit.layer)                   # (a new view reads the layer set)
            session.set_head(unit.head)
            if unit.stage.key != view_key:
                if view is not None:
                    self._close_view(view)
                view = create_view(unit.stage.key, session, self._host)
                self._views.append(view)
                view_key = unit.stage.key
                self.progressed.emit(index * STEPS_PER_UNIT, self.total, unit.stage.title)
                yield
            plots = view.plots()
            problem = getattr(view, "_problem", None)
            if problem:                       # said, never skipped in silence
                self.problems.append(f"{unit.stage.number:02d}-{unit.stage.key}: not drawn: {problem}")
            for k, (name, item) in enumerate(plots):
                path = self.folder / plot_file_name(unit.stage, name, unit.layer, unit.head, options.format)
                self.progressed.emit(index * STEPS_PER_UNIT + k * STEPS_PER_UNIT // len(plots),
                                     self.total, path.name)
                where = f"layer {unit.layer}, head {unit.head}" if unit.stage.per_head else \
                    f"layer {unit.layer}" if unit.stage.per_layer else ""
                title = f"{unit.stage.number}. {unit.stage.title}: {name}" + (f" ({where})" if where else "")
                description = f"Transformer Stepper · {model.name} · {session.trace.text!r}"
                if session.trace.interventions:       # the intervened pass, as the stepper showed it
                    description += f" · intervened: {describe_all(session.trace.interventions)}"
                facts = metadata.figure_facts(model, session.trace, unit.stage.key, unit.layer, unit.head,
                                              session.selected_token)
                self._submit(path, render(item, options, title, description), facts)
                yield
        if view is not None:
            self._close_view(view)
        self.progressed.emit(self.total, self.total, "")

    def _compute(self, layer: int) -> None:
        task = Task(next(self._ids), self.session.trace.prepare, layer)
        task.signals.finished.connect(lambda _id, _result: self._on_prepared(layer))
        task.signals.failed.connect(lambda _id, message, _user: self._fail(
            f"computing layer {layer} failed: {message}"))
        self._computing[layer] = task
        self._compute_pool.start(task)

    def _detail_of(self, layer: int) -> Iterator[None]:
        """Compute a layer's detail in the worker (unless it is under way already); the steps
        pause (the timer stopped, the event loop free) until it is there."""
        if layer not in self._computing:
            self._compute(layer)
        self._waiting = layer
        while layer in self._computing:
            yield
        self._waiting = None

    def _on_prepared(self, layer: int) -> None:
        task = self._computing.pop(layer, None)
        if task is not None:               # its run() may not have returned yet: kept till the end
            self._computed_tasks.append(task)
        if self.state == "running" and self._waiting == layer and not self._timer.isActive():
            self._timer.start()

    def _tick(self) -> None:
        if self.state != "running" or self._stepping:
            return
        if self._waiting is not None and self._waiting in self._computing:
            self._timer.stop()             # the computed layer restarts it
            return
        if len(self._tasks) >= self.max_pending:
            self._timer.stop()             # a finished write restarts it
            return
        self._stepping = True
        try:
            next(self._steps)
        except StopIteration:
            self._steps_done = True
            self._timer.stop()
            self._finish_if_done()
        except KeyboardInterrupt:          # Ctrl-C lands in whatever Python runs: here, mostly
            self.interrupted = True
            self.cancel()
        except Exception as exc:           # a bug in a view or in rendering: report, keep running
            traceback.print_exc()
            self._fail(f"rendering failed: {type(exc).__name__}: {exc}")
        finally:
            self._stepping = False

    # -- the writes (worker) ---------------------------------------------------------------
    def _submit(self, path: Path, rendered: Rendered, facts: Optional[dict] = None) -> None:
        if self.state != "running":
            return
        request_id = next(self._ids)
        task = Task(request_id, self._write, request_id, path, rendered, facts)
        task.signals.finished.connect(self._on_written)
        task.signals.failed.connect(self._on_write_failed)
        self._tasks[request_id] = task
        self._pool.start(task)

    def _write(self, request_id: int, path: Path, rendered: Rendered,
               facts: Optional[dict] = None) -> tuple[str, bool]:
        """Worker side. Also noted here (list.append is atomic), so that a job stopped while a
        write was under way still counts and reports that file."""
        result = _encode_and_write(path, rendered, facts, self.caption)
        self._completed.append((request_id, result))
        return result

    def _on_written(self, request_id: int, result: tuple[str, bool]) -> None:
        self._tasks.pop(request_id, None)
        if request_id in self._delivered:
            return
        self._delivered.add(request_id)
        path, replaced = Path(result[0]), result[1]
        self.written.append(path)
        if replaced:
            self.replaced.append(path)
        self.fileWritten.emit(str(path), replaced)
        if self.state == "running":
            if not self._steps_done and not self._timer.isActive():
                self._timer.start()
            self._finish_if_done()

    def _on_write_failed(self, request_id: int, message: str, user_error: bool) -> None:
        self._tasks.pop(request_id, None)
        self._fail(message if user_error else f"writing failed: {message}")

    # -- ending -------------------------------------------------------------------------------
    def _finish_if_done(self) -> None:
        if self.state == "running" and self._steps_done and not self._tasks:
            self.state = "done"
            self._stop()
            self.finished.emit()

    def _fail(self, message: str) -> None:
        if self.state != "running":
            return
        self.state = "failed"
        self.error = message
        self._stop()
        self.failed.emit(message)

    def _stop(self) -> None:
        """Stop rendering, let the writes of figures already rendered finish (milliseconds each,
        at most max_pending of them: dropping queued ones made what was saved depend on thread
        timing), and free the views."""
        self._timer.stop()
        if self._steps is not None and not self._stepping:
            self._steps.close()
        self._pool.waitForDone()
        for request_id, result in list(self._completed):   # finished while we waited
            self._on_written(request_id, result)
        for view in list(self._views):
            self._close_view(view)
        if self._host is not None:
            if self._stepping:             # the step under way still holds a view: later
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
        if not self._tasks and self._pool.activeThreadCount() == 0:
            # free the closed views now, between writes: their Qt objects first (collector.py)
            collect()
