"""One token strip per sentence compared: the compared token highlighted, a click compares
another token of that sentence, and a line under it when the sentence has a note or a
problem (no such word: nothing is computed for it)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from ...core.analysis.compare import MAX_SENTENCES, Comparison
from ..stepper.token_strip import TokenStrip
from .figures import sentence_colour


class SentenceRow(QWidget):
    def __init__(self, number: int, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.tag = QLabel(f"S{number}")
        self.tag.setFixedWidth(26)
        self.tag.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignRight)
        self.tag.setStyleSheet(f"color: {sentence_colour(number).name()}; font-weight: bold; padding-top: 4px;")
        column = QVBoxLayout()
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(1)
        self.strip = TokenStrip()
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        column.addWidget(self.strip)
        column.addWidget(self.note)
        layout.addWidget(self.tag)
        layout.addLayout(column, stretch=1)

    def show_note(self, text: str, problem: bool) -> None:
        self.note.setText(text)
        self.note.setStyleSheet("color: #b00020;" if problem else "color: #555;")
        self.note.setVisible(bool(text))


class SentenceStrips(QScrollArea):
    tokenClicked = Signal(int, int)          # sentence index (0-based among compared), token

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        inner = QWidget()
        layout = QVBoxLayout(inner)
        layout.setContentsMargins(0, 0, 4, 0)
        layout.setSpacing(4)
        self.rows: list[SentenceRow] = []
        for i in range(MAX_SENTENCES):
            row = SentenceRow(i + 1)
            row.strip.tokenClicked.connect(lambda token, i=i: self.tokenClicked.emit(i, token))
            row.setVisible(False)
            layout.addWidget(row)
            self.rows.append(row)
        layout.addStretch(1)
        self.setWidget(inner)

    def show_comparison(self, comparison: Optional[Comparison], labels: list[list[str]]) -> None:
        sentences = comparison.sentences if comparison is not None else ()
        for i, row in enumerate(self.rows):
            if i >= len(sentences):
                row.setVisible(False)
                continue
            sentence = sentences[i]
            trace = sentence.trace
            selected = sentence.position if sentence.position is not None else -1
            shown = (id(trace), selected)
            if getattr(row, "shown", None) != shown:      # a strip repaints only when it changed
                row.shown = shown
                if trace is not None:
                    row.strip.set_tokens(labels[i], trace.input_ids, trace.special_tokens_mask, selected)
                else:
                    row.strip.set_tokens([], [], [], -1)
            if sentence.problem:
                hint = " — click a token to compare it instead" if trace is not None else ""
                row.show_note(f"{sentence.problem}{hint}", problem=True)
            else:
                row.show_note(sentence.note, problem=False)
            row.setVisible(True)
