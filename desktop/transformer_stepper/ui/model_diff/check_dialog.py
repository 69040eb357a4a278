"""Help → Check Against Transformers: the open model and text run by Hugging Face transformers
in a process of its own (io/hf_check.py; a job on its own lane, so the app stays live and the
Stepper's tracing never waits), the report shown when it lands; Cancel ends the process."""
from __future__ import annotations

from typing import Optional

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from ...io.hf_check import CheckOutcome, run_check
from ...io.resources import builtin_model_dir
from ...state.scheduler import Job

LANE = "check"


class CheckDialog(QDialog):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.session = window.session
        self.setWindowTitle("Check against Hugging Face transformers")
        layout = QVBoxLayout(self)
        self.status = QLabel()
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.report = QPlainTextEdit()
        self.report.setReadOnly(True)
        self.report.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        layout.addWidget(self.report, stretch=1)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.rejected.connect(self.close)
        layout.addWidget(self.buttons)
        self.outcome: Optional[CheckOutcome] = None
        self.job: Optional[Job] = None
        self.resize(640, 420)

    def start(self) -> None:
        session = self.session
        trace = session.trace
        if session.model is None or trace is None:
            self.status.setText("Open a model and type a text first: the check runs them.")
            return
        path = session.model_path or str(builtin_model_dir())
        then = ", then llama.cpp on the file," if str(path).lower().endswith(".gguf") else ""
        self.status.setText(f"Running Hugging Face transformers on {path} with the {trace.n_seq} tokens of "
                            f"the text{then} in a process of its own (loading torch takes a while)…")
        self.job = Job(1, run_check, (path, trace), reports=True, lane=LANE)
        session.workers.start(self.job, self._done, self._failed, None, self._cancelled)

    def _done(self, _number: int, outcome: CheckOutcome) -> None:
        self.job = None
        self.outcome = outcome
        self.status.setText("Per layer, the largest |app − Hugging Face| of the hidden state and the "
                            "attention weights; the verdict against 1e-4."
                            if outcome.result is not None else "The check could not run:")
        self.report.setPlainText("\n".join(outcome.lines()))
        self._finished()

    def _failed(self, _number: int, message: str, _user_error: bool = True) -> None:
        self.job = None
        self.status.setText(f"The check failed: {message}")
        self._finished()

    def _cancelled(self, _number: int) -> None:
        self.job = None

    def _finished(self) -> None:
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)

    def closeEvent(self, event) -> None:
        if self.job is not None:           # ends the worker's process at its next look
            self.job.cancel()
        super().closeEvent(event)


def show_check(window) -> CheckDialog:
    dialog = CheckDialog(window)
    dialog.show()
    dialog.start()
    window.check_dialog = dialog
    return dialog
