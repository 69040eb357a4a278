"""File → Save Session… / Open Session…: the window's view as a `.stepper` file
(io/session_file.py) and back. Opening checks the model first: a missing model, or one whose
fingerprint differs, is said in one line and the user may point to the model (or cancel);
then the model opens (in a worker, as always), the text traces (the session's restore,
state/session_restore.py: its generated tokens appended by the same KV-cache step generation
uses; a restore overtaken by another, or by another model, is dropped) and the view is set
(ui/view_apply.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox

from ...core.model.errors import ModelError
from ...core.trace.generate import Sampling
from ...io.session_file import SessionData, model_fingerprint, read_session, write_session
from ..view_apply import apply_view

SESSION_FILES = "Transformer Stepper sessions (*.stepper);;All files (*)"


def typed_and_generated(trace) -> tuple[str, tuple[int, ...]]:
    """The typed text and the ids generated after it (generation appends at the end)."""
    generated = np.flatnonzero(trace.generated)
    if not len(generated):
        return trace.text, ()
    first = int(generated[0])
    return trace.text[:int(trace.offsets[first][0])], tuple(int(i) for i in trace.input_ids[first:])


def collect(window) -> SessionData:
    session = window.session
    if session.model is None or session.trace is None:
        raise ModelError("nothing to save yet: no model or no trace")
    text, generated = typed_and_generated(session.trace)
    compare = window.tabs.views.get("compare")
    sentences = tuple(compare.state.texts()) if compare is not None else ()
    word = compare.word_box.text() if compare is not None else ""
    path = session.model_path
    path = None if path is None else str(Path(path).expanduser().resolve())
    return SessionData(model_path=path, model_name=session.model.name, fingerprint=model_fingerprint(path),
                       text=text, generated_ids=generated, sentences=sentences, word=word,
                       tab=window.tabs.current_key() or "stepper", stage=session.stage_key,
                       layer=session.layer, head=session.head, selected=session.selected_token,
                       temperature=session.temperature, interventions=session.interventions,
                       show_intervened=session.show_intervened,
                       sampling=vars(session.generation.sampling).copy())


class SessionOpener(QObject):
    """Open one session file into the window; `finished` carries '' or the one-line problem."""
    finished = Signal(str)

    def __init__(self, window, path: str, choose_model: Optional[Callable[[str], Optional[str]]] = None) -> None:
        super().__init__(window)
        self.window_, self.path = window, path
        self.choose_model = choose_model or self._ask_for_model
        self.data: Optional[SessionData] = None
        self.notes: list[str] = []
        self._restore: Optional[int] = None       # the number of the session's restore, once started

    def start(self) -> None:
        try:
            self.data = read_session(Path(self.path))
        except ModelError as exc:
            return self._done(str(exc))
        model_path = self.data.model_path
        problem = self._model_problem(model_path)
        if problem:
            model_path = self.choose_model(problem)
            if model_path is None:
                return self._done(problem)
            self.notes.append(problem + f"; opened {model_path} instead")
        session = self.window_.session
        if session.model is not None and _same(session.model_path, model_path):
            return self._model_ready()
        session.modelChanged.connect(self._model_ready)
        session.openFailed.connect(self._open_failed)
        self.window_.open_model(model_path)

    def _model_problem(self, path: Optional[str]) -> str:
        data = self.data
        if path is not None and not Path(path).exists():
            return f"{self.path}: the model {path} is not there"
        try:
            found = model_fingerprint(path)
        except ModelError as exc:
            return str(exc)
        if found != data.fingerprint:
            return (f"{self.path}: the model at {path or 'the built-in model'} is not the one saved "
                    f"(its fingerprint differs: the weights changed)")
        return ""

    def _ask_for_model(self, problem: str) -> Optional[str]:
        box = QMessageBox(QMessageBox.Icon.Warning, "Open Session", problem, parent=self.window_)
        choose = box.addButton("Choose the Model…", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        if box.clickedButton() is not choose:
            return None
        folder = QFileDialog.getExistingDirectory(self.window_, "The session's model folder")
        return folder or None

    def _disconnect(self) -> None:
        session = self.window_.session
        for signal, slot in ((session.modelChanged, self._model_ready), (session.openFailed, self._open_failed)):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):
                pass

    def _open_failed(self, message: str) -> None:
        self._disconnect()
        self._done(f"{self.path}: the model did not open: {message}")

    def _model_ready(self) -> None:
        self._disconnect()
        session, data = self.window_.session, self.data
        config = session.model.config
        for value, count, what in ((data.layer, config.n_layer, "layer"), (data.head, config.n_head, "head")):
            if value >= count:
                return self._done(f"{self.path}: view.{what} {value} is outside the model's {count} {what}s")
        events = session.restore.events
        events.traced.connect(self._traced)
        events.failed.connect(self._restore_failed)
        self._restore = session.restore.start(session.model, data.text, data.generated_ids, data.layer)

    def _stop_listening(self) -> None:
        events = self.window_.session.restore.events
        for event, slot in ((events.traced, self._traced), (events.failed, self._restore_failed)):
            try:
                event.disconnect(slot)
            except TypeError:
                pass

    def _restore_failed(self, number: int, message: str) -> None:
        if number == self._restore:           # (another opener's restore is not ours)
            self._stop_listening()
            self._done(f"{self.path}: {message}")

    def _traced(self, number: int, trace) -> None:
        if number != self._restore:
            return
        self._stop_listening()
        session, data = self.window_.session, self.data
        if data.selected >= trace.n_seq:
            return self._done(f"{self.path}: view.selected {data.selected} is outside the text's {trace.n_seq} tokens")
        session.generation.set_sampling(Sampling(**data.sampling))
        session.show_trace(trace, 0.0)
        apply_view(self.window_, sentences=data.sentences if data.sentences or data.word else None,
                   word=data.word, tab=data.tab, stage=data.stage, layer=data.layer, head=data.head,
                   selected=data.selected, temperature=data.temperature, interventions=data.interventions)
        session.set_show_intervened(data.show_intervened)
        self._done("")

    def _done(self, message: str) -> None:
        self.finished.emit(message)
        if message:
            self.window_.show_error("Could not open the session", message)
        elif self.notes:
            self.window_.statusBar().showMessage(" · ".join(self.notes), 15000)


def _same(a: Optional[str], b: Optional[str]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def open_session(window, path: str, choose_model=None) -> SessionOpener:
    opener = SessionOpener(window, path, choose_model)
    opener.start()
    return opener


def save_session(window, path: str) -> None:
    write_session(Path(path), collect(window))


def add_session_actions(window, menu) -> None:
    def save() -> None:
        path, _ = QFileDialog.getSaveFileName(window, "Save Session", str(Path.home() / "session.stepper"),
                                              SESSION_FILES)
        if path:
            try:
                save_session(window, path if path.endswith(".stepper") else path + ".stepper")
            except ModelError as exc:
                window.show_error("Could not save the session", str(exc))

    def load() -> None:
        path, _ = QFileDialog.getOpenFileName(window, "Open Session", str(Path.home()), SESSION_FILES)
        if path:
            window.session_opener = open_session(window, path)

    menu.addAction("Open &Session…", load)
    menu.addAction("Save Sessi&on…", save)
