"""The explanation panel beside a view's plots: markdown that is replaced only when it changed,
keeping the reader's scroll position (and skipping the layout) otherwise."""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QTextBrowser, QWidget


class ExplanationPanel(QTextBrowser):
    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.shown_markdown: Optional[str] = None

    def show_markdown(self, markdown: str) -> None:
        if markdown == self.shown_markdown:
            return
        self.shown_markdown = markdown
        scroll = self.verticalScrollBar().value()
        self.setMarkdown(markdown)
        self.verticalScrollBar().setValue(scroll)
