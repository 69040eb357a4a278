"""Help → Model Vocabulary: every piece of the open model's tokenizer with its id, filtered as
one types, so a learner can see which words the model knows (a word outside it becomes the
unknown token, [UNK], and the model sees one vector for all such words)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QSortFilterProxyModel, QStringListModel, Qt
from PySide6.QtWidgets import QDialog, QLabel, QLineEdit, QListView, QVBoxLayout, QWidget


class VocabularyDialog(QDialog):
    def __init__(self, model, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        tokenizer = model.tokenizer
        entries = tokenizer.vocabulary()
        self.setWindowTitle(f"Vocabulary of {model.name}")
        unknown = tokenizer.unknown_id
        layout = QVBoxLayout(self)
        said = (f"{len(entries):,} pieces. A word made of none of them becomes "
                f"{tokenizer.id_to_token(unknown)} (id {unknown})." if unknown is not None else
                f"{len(entries):,} pieces. Byte-level: any text is spelled with them, none is unknown.")
        self.summary = QLabel(said)
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter: type part of a word")
        self.filter.setClearButtonEnabled(True)
        layout.addWidget(self.filter)
        self.entries = QStringListModel([f"{i:>6}  {piece}" for i, piece in entries], self)
        self.shown = QSortFilterProxyModel(self)
        self.shown.setSourceModel(self.entries)
        self.shown.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.filter.textChanged.connect(self.shown.setFilterFixedString)
        self.list = QListView()
        self.list.setModel(self.shown)
        self.list.setUniformItemSizes(True)
        layout.addWidget(self.list)
        self.resize(360, 480)


def show_vocabulary(window) -> Optional[VocabularyDialog]:
    model = window.session.model
    if model is None:
        return None
    dialog = VocabularyDialog(model, window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    window.vocabulary_dialog = dialog
    return dialog
