"""The Generate toolbar (decoders): next token, n tokens, until the end, stop, undo; and the
sampling settings (temperature 0 = greedy, top-k 0 = off, top-p 1 = off, seed). It reads and
drives session.generation; a model that cannot generate gets the controls disabled, with why."""
from __future__ import annotations

from typing import Optional

import numpy as np

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDoubleSpinBox, QLabel, QSpinBox, QToolBar, QWidget

from ..reflow import ElidingLabel

from ...core.trace.generate import Sampling
from ...core.analysis.labels import readable
from ...core.analysis.readouts import recent_loop
from ...state.generation import UNTIL_END_LIMIT
from ..session import Session


def undecodable_note(trace) -> str:
    """Generated ids that decode to no whole character (a byte of a multi-byte UTF-8
    character, completed only by a later token) reach the text as '�': say which ids they are."""
    ids = [int(trace.input_ids[i]) for i in np.flatnonzero(trace.generated)
           if "\ufffd" in trace.text[trace.offsets[i][0]:trace.offsets[i][1]]]
    if not ids:
        return ""
    which = ", ".join(str(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")
    return (f" · � in the text: token id{'s' if len(ids) > 1 else ''} {which} "
            f"(part of a multi-byte character, not a whole one)")


class GenerateBar(QToolBar):
    def __init__(self, session: Session, parent: Optional[QWidget] = None) -> None:
        super().__init__("Generate", parent)
        self.setObjectName("generate")
        self.setMovable(False)
        self.session = session
        self.control = control = session.generation
        self.addWidget(QLabel(" Generate: "))
        self.next_action = self._action("Next &Token", "Ctrl+Return",
                                        "Append the token the model chooses next (Ctrl+Enter)",
                                        lambda: control.generate(1))
        self.many_action = self._action("+ &N", "Ctrl+Shift+Return",
                                        "Append N tokens, one step at a time (Ctrl+Shift+Enter)",
                                        lambda: control.generate(self.count_box.value()))
        self.count_box = QSpinBox()
        self.count_box.setRange(1, UNTIL_END_LIMIT)
        self.count_box.setValue(10)
        self.count_box.setToolTip("N: how many tokens + N appends")
        self.addWidget(self.count_box)
        self.until_action = self._action("Until &End", "", "", control.generate_until_end)
        self.stop_action = self._action("&Stop", "Ctrl+.", "Stop generating (Ctrl+.)", control.stop)
        self.undo_action = self._action("&Undo Token", "Ctrl+Backspace",
                                        "Remove the last generated token, to try another choice "
                                        "(Ctrl+Backspace)", control.undo)
        self.addSeparator()
        self.temperature_box = self._spin(QDoubleSpinBox(), " T ", (0.0, 10.0), 0.0, 0.1,
                                          "Temperature: logits / T before the softmax; 0 = greedy "
                                          "(always the most likely token)", "greedy")
        self.temperature_box.setDecimals(2)
        self.top_k_box = self._spin(QSpinBox(), " top-k ", (0, 1_000_000), 0, 1,
                                    "Keep only the k most likely tokens (0 = off)", "off")
        self.top_p_box = self._spin(QDoubleSpinBox(), " top-p ", (0.01, 1.0), 1.0, 0.05,
                                    "Keep the most likely tokens until their probability adds up "
                                    "to p (1 = off)")
        self.top_p_box.setDecimals(2)
        self.seed_box = self._spin(QSpinBox(), " seed ", (0, 2**31 - 1), 0, 1,
                                   "The seed of sampling: the same seed gives the same text "
                                   "(a token depends on the seed and its position)")
        self.addSeparator()
        self.status = ElidingLabel()          # what fits; the whole message in its tooltip
        self._loop_why = ""                   # why the generated text loops (the tooltip adds it)
        self.status.setStyleSheet("color: #555; padding-left: 6px;")
        self.addWidget(self.status)
        control.changed.connect(self.refresh)
        session.traceChanged.connect(self.refresh)
        session.modelChanged.connect(self._model_changed)
        session.busyChanged.connect(lambda *_: self.refresh())
        self._model_changed()

    def _action(self, text: str, keys: str, tip: str, slot) -> QAction:
        action = QAction(text, self)
        if keys:
            action.setShortcut(QKeySequence(keys))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.setToolTip(tip)
        action.triggered.connect(lambda _=False: slot())
        self.addAction(action)
        return action

    def _spin(self, box, label: str, limits, value, step, tip: str, special: str = ""):
        self.addWidget(QLabel(label))
        box.setRange(*limits)
        box.setValue(value)
        box.setSingleStep(step)
        box.setToolTip(tip)
        box.setKeyboardTracking(False)
        if special:
            box.setSpecialValueText(special)       # shown at the minimum
        box.valueChanged.connect(lambda _: self._sampling_edited())
        self.addWidget(box)
        return box

    def _sampling_edited(self) -> None:
        self.control.set_sampling(Sampling(temperature=float(self.temperature_box.value()),
                                           top_k=int(self.top_k_box.value()),
                                           top_p=float(self.top_p_box.value()),
                                           seed=int(self.seed_box.value())))

    def _model_changed(self) -> None:
        model = self.session.model
        if model is not None:
            self.top_k_box.setMaximum(model.config.n_vocab)
        ends = self.control.end_ids()
        self.until_action.setToolTip(
            f"Append tokens until the model writes the end of a text "
            f"({', '.join(repr(model.tokenizer.id_to_token(i)) for i in ends)}), the context is "
            f"full, or {UNTIL_END_LIMIT} tokens" if ends and model is not None else
            f"This model's tokenizer has no end-of-text token: appends until the context is "
            f"full or {UNTIL_END_LIMIT} tokens")
        self.refresh()

    def refresh(self) -> None:
        control, session = self.control, self.session
        reason = control.why_not()
        idle = not control.running and not session.busy
        for action in (self.next_action, self.many_action, self.until_action):
            action.setEnabled(idle and not reason)
        for widget in (self.count_box, self.temperature_box, self.top_k_box, self.top_p_box,
                       self.seed_box):
            widget.setEnabled(session.model is not None and session.model.can_generate)
        self.stop_action.setEnabled(control.running)
        self.undo_action.setEnabled(idle and control.can_undo())
        self.setToolTip(reason)
        self._loop_why = ""
        self.status.setText(self._status(reason))          # (its tooltip: the whole message)
        if self._loop_why:                                  # and why greedy decoding loops
            self.status.setToolTip(f"{self.status.toolTip()}\n\n{self._loop_why}")

    def _status(self, reason: str) -> str:
        control, trace = self.control, self.session.trace
        if reason and (trace is None or not trace.generated.any()):
            return reason
        if control.running:
            total = control.done + control.left
            return f"generating {control.done + 1} of {total}…" if total <= UNTIL_END_LIMIT else "generating…"
        if trace is None or not trace.generated.any():
            return ""
        n_generated = int(trace.generated.sum())
        kept = ("the latents (keys and values rebuilt from them)" if trace.config.is_mla
                else "the keys and values")                  # multi-head latent attention's cache
        cache = (f"; last step computed {trace.computed_rows} position, reused {kept} "
                 f"of {trace.n_seq - trace.computed_rows}" if trace.computed_rows else "")
        timing = f" in {1000 * control.step_seconds:.0f} ms" if trace.computed_rows else ""
        return (f"{n_generated} generated{cache}{timing}" + undecodable_note(trace)
                + self._loop_note(trace) + (f" · {reason}" if reason else ""))

    def _loop_note(self, trace) -> str:
        """Greedy decoding stuck in a loop: say so here, and why in the tooltip."""
        loop = recent_loop(trace.input_ids[np.flatnonzero(trace.generated)])
        greedy = self.control.sampling.temperature == 0
        if loop is None:
            return ""
        tokenizer = self.session.model.tokenizer
        generated = trace.input_ids[np.flatnonzero(trace.generated)]
        block = " ".join(readable(tokenizer.id_to_token(int(t)) or "?")
                         for t in generated[loop.start:loop.start + loop.period])
        self._loop_why = (
            "Greedy decoding (T = greedy) always appends the single most likely token. Once a "
            "small model has repeated a word, the repeat itself makes the same word the most likely "
            "next one (attention finds the copies), and past the length of the passages it was "
            "trained on it has never seen what should come next, so greedy decoding stays in the loop. Sampling draws from the probabilities instead: "
            "set T above 0 (e.g. 0.8), with top-k or top-p to cut the unlikely tail, and Undo the "
            "looped tokens." if greedy else
            "Sampling can loop too when one continuation dominates: raise T, or undo and change the seed.")
        return f" · a loop: '{block}' ×{loop.repeats}" + (" (greedy; try T > 0)" if greedy else "")
