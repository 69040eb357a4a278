"""The provenance panel: Alt-click (or Ctrl-click) a value in any stage's plot and this dock shows
the arithmetic that made it, with the actual numbers (core/analysis/provenance/explain.py): the formula, the
largest terms and the rest summed, each step to the value, the trace's own value beside the
recomputed one, and "Copy as Python" (a few lines with the public API that give the same
number). It follows the session: a new trace (typing) re-explains the same address."""
from __future__ import annotations

import html
import time
from typing import Optional

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QDockWidget, QHBoxLayout, QLabel, QMainWindow, QPlainTextEdit,
                               QPushButton, QTextBrowser, QVBoxLayout, QWidget)

from ...core.model import stages
from ...core.model.interventions import describe_all
from ...core.analysis.provenance.difference import DifferenceExplanation, explain_difference
from ...core.analysis.provenance.explain import Explanation, explain
from ..connections import Connections
from ..reflow import scrolling
from ..session import Session
from .provenance_difference import difference_html, difference_python

PANEL_WIDTH = 440            # what the dock opens at: a term's label and three numbers a row
MINIMUM_WIDTH = 320          # narrower, "-0.1234567" wraps mid-number
HINT = ("Alt-click (or Ctrl-click) a value in a plot — a score, a weight, a head output, q, k, v, "
        "a norm, a feed-forward unit, a logit — to see the arithmetic that made it.")


def _num(value: float) -> str:
    if value == float("-inf"):
        return "−∞"
    return f"{value:.7g}"


def term_headers(e: Explanation) -> tuple[str, str, str]:
    """The heads of the terms' three number columns: a, b and a·b for products; for terms of
    one number (a softmax's exp(s - max), ...) its argument and the term, not 'a·b'."""
    factors = max((len(t.factors) for t in e.terms), default=0)
    if factors >= 2:
        return "a", "b", "a·b"
    if factors == 1:
        return "x", "", "term"
    return "", "", "term"


def explanation_html(e: Explanation) -> str:
    """The explanation as a small HTML document: formula, terms, steps, notes, sources."""
    parts = [f"<p><b>{html.escape(e.title)}</b></p>",
             f"<p style='font-family: monospace; background: #f3f3f3;'>&nbsp;{html.escape(e.formula)}</p>"]
    if e.terms:
        rows = ""
        for t in e.terms:
            factors = [f"<td align='right'>{_num(f)}</td>" for f in t.factors[:2]]
            factors += ["<td></td>"] * (2 - len(factors))
            rows += (f"<tr><td>{html.escape(t.label)}</td>{''.join(factors)}"
                     f"<td align='right'><b>{_num(t.value)}</b></td></tr>")
        if e.n_terms > len(e.terms):
            rows += (f"<tr><td><i>the other {e.n_terms - len(e.terms)} terms</i></td><td></td><td></td>"
                     f"<td align='right'>{_num(e.rest)}</td></tr>")
        rows += (f"<tr><td><b>Σ = {html.escape(e.terms_label)}</b></td><td></td><td></td>"
                 f"<td align='right'><b>{_num(e.terms_total)}</b></td></tr>")
        what = "largest first, by |term|" if e.terms_label != "sum" else "in the formula's order"
        heads = "".join(f"<th align='right'>{html.escape(h)}</th>" for h in term_headers(e))
        parts.append(f"<p>{e.n_terms} terms ({what}):</p>"
                     "<table cellspacing='0' cellpadding='2' border='0' width='100%'>"
                     f"<tr><th align='left'>term</th>{heads}</tr>{rows}</table>")
    steps = "".join(f"<tr><td>{html.escape(s.label)}</td><td align='right'>{_num(s.value)}</td></tr>"
                    for s in e.steps)
    steps += (f"<tr><td><b>the trace's value</b></td><td align='right'><b>{_num(e.traced)}</b></td></tr>")
    parts.append("<p>Steps:</p><table cellspacing='0' cellpadding='2' width='100%'>" + steps + "</table>")
    for note in e.notes:
        parts.append(f"<p style='color: #555;'>{html.escape(note)}</p>")
    owner = stages.stage_computing(e.name)
    if owner is not None:
        parts.append(f"<p style='color: #555;'>Stage {owner.number} ({html.escape(owner.title)}) "
                     f"computes it: <code>transformer_stepper.{owner.function}</code></p>")
    for source in e.sources:
        parts.append("<hr/>" + explanation_html(source))
    return "".join(parts)


class ProvenancePanel(QWidget):
    def __init__(self, session: Session, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.address: Optional[tuple[str, tuple]] = None
        self.explanation: Optional[Explanation] = None
        self.difference: Optional[DifferenceExplanation] = None    # while the views show A − B
        self.seconds = 0.0                      # how long the last explanation took
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.body = QTextBrowser()
        self.body.setOpenExternalLinks(False)
        self.body.setPlainText(HINT)
        layout.addWidget(self.body, stretch=3)
        self.check = QLabel()
        self.check.setWordWrap(True)
        layout.addWidget(self.check)
        self.python = QPlainTextEdit()
        self.python.setReadOnly(True)
        self.python.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.python.setPlaceholderText("the Python that recomputes the value appears here")
        self.python.setToolTip("Run with `model` and `trace` in scope: it sets `value`")
        layout.addWidget(self.python, stretch=1)
        buttons = QHBoxLayout()
        self.copy_python = QPushButton("Copy as Python")
        self.copy_python.clicked.connect(lambda: self._copy(self.python.toPlainText()))
        self.copy_text = QPushButton("Copy as text")
        self.copy_text.clicked.connect(lambda: self._copy(self.difference.text() if self.difference else
                                                          self.explanation.text() if self.explanation else ""))
        for button in (self.copy_python, self.copy_text):
            button.setEnabled(False)
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.setMinimumWidth(MINIMUM_WIDTH)
        self._connections = Connections([(session.provenanceRequested, self.explain),
                                         (session.traceChanged, self._on_trace),
                                         (session.shownTraceChanged, self._on_trace)])

    def sizeHint(self) -> QSize:
        return QSize(PANEL_WIDTH, super().sizeHint().height())

    def explain(self, name: str, index) -> None:
        """Show where the current trace's value name[index] comes from."""
        self.address = (name, tuple(index))
        self._show()

    def _on_trace(self) -> None:
        """The same address in the new trace; cleared, with a sentence, when the new trace has
        no such value (a shorter text, another model)."""
        if self.address is not None:
            self._show(followed=True)

    def _show(self, followed: bool = False) -> None:
        session, (name, index) = self.session, self.address
        trace = session.shown_trace          # the value clicked: intervened while the stepper shows it
        if trace is None or session.model is None:
            self._clear("No trace: type a sentence.")
            return
        against, model_b = getattr(session, "against", None), getattr(session, "against_model", None)
        if against is not None and model_b is not None:
            self._show_difference(trace, against, model_b, name, index, followed)
            return
        self.difference = None
        start = time.perf_counter()
        try:
            explanation = explain(session.model, trace, name, index)
        except (IndexError, KeyError) as error:
            if followed:
                self.address = None
                self._clear(f"The value explained here, {name}{list(index)}, is not in the new "
                            f"trace ({trace.n_seq} tokens, {session.model.config.name}). "
                            f"Alt-click a value to explain it.")
            else:
                self._clear(f"{name}{list(index)}: not in this trace ({error.args[0]}).")
            return
        self.seconds = time.perf_counter() - start
        self.explanation = explanation
        intervened = ("<p style='background: #ffe9b3; padding: 3px;'><b>intervened:</b> "
                      f"{html.escape(describe_all(trace.interventions))}</p>" if trace.interventions else "")
        self.body.setHtml(intervened + explanation_html(explanation))
        ok = explanation.matches()
        mark = "✓ recomputed = traced" if ok else "✗ recomputed ≠ traced"
        self.check.setText(f"<span style='color: {'#1a7f37' if ok else '#b00020'};'>{mark}</span> "
                           f"(difference {explanation.error:.1e}) · {1000 * self.seconds:.1f} ms")
        self.python.setPlainText(explanation.python)
        self.copy_python.setEnabled(True)
        self.copy_text.setEnabled(True)

    def _show_difference(self, trace, against, model_b, name: str, index, followed: bool) -> None:
        """A − B of the value: both models' arithmetic side by side, their summands paired."""
        session = self.session
        start = time.perf_counter()
        try:
            d = explain_difference(session.model, trace, model_b, against, name, index)
        except (IndexError, KeyError) as error:
            if followed:
                self.address = None
            self._clear(f"A − B of {name}{list(index)}: no provenance ({error.args[0]}).")
            return
        self.seconds = time.perf_counter() - start
        self.explanation, self.difference = d.a, d
        names = getattr(session, "pair_names", None) or (session.model.name, getattr(session, "against_name", "") or "B")
        self.body.setHtml(difference_html(d, names, explanation_html))
        ok = d.a.matches() and d.b.matches()
        mark = "✓ recomputed = traced in A and in B" if ok else "✗ recomputed ≠ traced"
        self.check.setText(f"<span style='color: {'#1a7f37' if ok else '#b00020'};'>{mark}</span> "
                           f"(A − B = {d.difference:.7g}) · {1000 * self.seconds:.1f} ms")
        self.python.setPlainText(difference_python(d))
        self.copy_python.setEnabled(True)
        self.copy_text.setEnabled(True)

    def _clear(self, message: str) -> None:
        self.explanation = self.difference = None
        self.body.setPlainText(message)
        self.check.setText("")
        self.python.setPlainText("")
        self.copy_python.setEnabled(False)
        self.copy_text.setEnabled(False)

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)

    def close(self) -> bool:
        self._connections.disconnect_all()
        return super().close()


def provenance_dock(window: QMainWindow, source) -> tuple[QDockWidget, ProvenancePanel]:
    """The panel in a dock on the window's right, hidden until the first Alt-click: `source`
    (the session, or the translation window's relay) asks with provenanceRequested."""
    panel = ProvenancePanel(source)
    dock = QDockWidget("Where does this number come from?", window)
    dock.setObjectName("provenance")
    dock.setWidget(scrolling(panel))      # a long formula scrolls inside the dock
    dock.setAllowedAreas(Qt.DockWidgetArea.RightDockWidgetArea | Qt.DockWidgetArea.BottomDockWidgetArea
                         | Qt.DockWidgetArea.LeftDockWidgetArea)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    dock.setVisible(False)

    def widen() -> None:
        if dock.isVisible() and not dock.isFloating() and dock.width() < PANEL_WIDTH:
            window.resizeDocks([dock], [PANEL_WIDTH], Qt.Orientation.Horizontal)

    def reveal(*_) -> None:
        if not dock.isVisible():
            dock.setVisible(True)
            # once the dock is in the window's layout (the next turn): asked now, while the
            # layout still has no room for it, the request is lost and the dock opens narrow
            QTimer.singleShot(0, dock, widen)
        dock.raise_()

    source.provenanceRequested.connect(reveal)
    return dock, panel


def install_provenance_dock(window: QMainWindow) -> QDockWidget:
    """The main window's provenance dock; the View menu toggles it."""
    dock, panel = provenance_dock(window, window.session)
    action = dock.toggleViewAction()
    action.setText("&Provenance Panel")
    window.view_menu.addAction(action)
    window.provenance_dock, window.provenance_panel = dock, panel
    return dock
