"""The clickable strip of tokens under the text box: each token's piece above its id, wrapped
over as many lines as needed. One painted widget (not one button per token) so a 512-token
text stays cheap."""
from __future__ import annotations

from typing import Optional, Sequence

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QScrollArea, QSizePolicy, QWidget

from .plots.common import SELECTED

PAD_X, PAD_Y, GAP, LINE_GAP = 6, 3, 4, 4
GENERATED_FILL, GENERATED_EDGE = "#e3f4e1", "#3a8f3a"     # tokens the model appended


class TokenStrip(QWidget):
    tokenClicked = Signal(int)
    heightChanged = Signal(int)

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.labels: list[str] = []
        self.ids: list[int] = []
        self.special: list[bool] = []
        self.generated: list[bool] = []           # appended by generation, not typed
        self.selected = -1
        self.piece_font = QFont()
        self.piece_font.setPointSize(10)
        self.id_font = QFont()
        self.id_font.setPointSize(8)
        self.boxes: list[QRectF] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.setToolTip("Click a token to select it in every plot")

    def set_tokens(self, labels: Sequence[str], ids: Sequence[int], special: Sequence[bool],
                   selected: int, generated: Optional[Sequence[bool]] = None) -> None:
        self.labels, self.ids, self.special = list(labels), [int(i) for i in ids], [bool(s) for s in special]
        self.generated = [bool(g) for g in generated] if generated is not None else [False] * len(self.ids)
        self.selected = selected
        self._layout()
        self.update()

    def set_selected(self, index: int) -> None:
        self.selected = index
        self.update()

    def _layout(self) -> None:
        piece_metrics, id_metrics = QFontMetrics(self.piece_font), QFontMetrics(self.id_font)
        height = piece_metrics.height() + id_metrics.height() + 2 * PAD_Y
        width_available = max(self.width(), 200)
        x, y = 0.0, 0.0
        self.boxes = []
        for label, token_id in zip(self.labels, self.ids):
            width = max(piece_metrics.horizontalAdvance(label), id_metrics.horizontalAdvance(str(token_id))) + 2 * PAD_X
            if x > 0 and x + width > width_available:
                x, y = 0.0, y + height + LINE_GAP
            self.boxes.append(QRectF(x, y, width, height))
            x += width + GAP
        total = int(y + height) + 2 if self.boxes else height
        if total != self.height():
            self.setFixedHeight(total)
            self.heightChanged.emit(total)

    def resizeEvent(self, event) -> None:
        self._layout()
        super().resizeEvent(event)

    def sizeHint(self) -> QSize:
        return QSize(600, self.height())

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        piece_height = QFontMetrics(self.piece_font).height()
        for i, box in enumerate(self.boxes):
            if not box.intersects(QRectF(event.rect())):
                continue
            selected = i == self.selected
            generated = self.generated[i]
            fill = QColor(SELECTED) if selected else QColor(
                GENERATED_FILL if generated else "#eef2f7" if not self.special[i] else "#e4e4e4")
            pen = QPen(QColor(GENERATED_EDGE if generated else "#b8c4d4"), 1.4 if generated else 1)
            if generated:
                pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.setBrush(fill)
            painter.drawRoundedRect(box.adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
            painter.setPen(QColor("#fff" if selected else ("#666" if self.special[i] else "#111")))
            painter.setFont(self.piece_font)
            painter.drawText(QRectF(box.x(), box.y() + PAD_Y, box.width(), piece_height),
                             Qt.AlignmentFlag.AlignCenter, self.labels[i])
            painter.setPen(QColor("#fff" if selected else "#667"))
            painter.setFont(self.id_font)
            painter.drawText(QRectF(box.x(), box.y() + PAD_Y + piece_height, box.width(),
                                    box.height() - piece_height - 2 * PAD_Y),
                             Qt.AlignmentFlag.AlignCenter, str(self.ids[i]))
        painter.end()

    def index_at(self, point) -> Optional[int]:
        for i, box in enumerate(self.boxes):
            if box.contains(point):
                return i
        return None

    def mousePressEvent(self, event) -> None:
        index = self.index_at(event.position())
        if index is not None and event.button() == Qt.MouseButton.LeftButton:
            self.tokenClicked.emit(index)

    def mouseMoveEvent(self, event) -> None:
        index = self.index_at(event.position())
        if index is not None:
            self.setToolTip(f"token {index}: '{self.labels[index]}', id {self.ids[index]}"
                            + (" (special token)" if self.special[index] else "")
                            + (" — generated (appended by the model, not typed)"
                               if self.generated[index] else "")
                            + "\nclick to select it in every plot")


class TokenStripArea(QScrollArea):
    """The strip in a scroll area at most a few lines tall."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.strip = TokenStrip()
        self.setWidget(self.strip)
        self.strip.heightChanged.connect(lambda _: self.fit_height())
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setFixedHeight(44)

    def fit_height(self) -> None:
        """As tall as the tokens need, up to three lines (then it scrolls)."""
        self.setFixedHeight(min(self.strip.height() + 2, 3 * 44 + 8))
