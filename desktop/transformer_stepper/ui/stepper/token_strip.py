"""The clickable strip of tokens under the text box: each token's piece above its id, wrapped
over as many lines as needed. One painted widget (not one button per token) so a 512-token
text stays cheap: a token's box width is measured once per piece and id, the boxes are laid
out again only when the tokens or the width change, and a repaint draws only the lines in
view (the strip scrolls after three)."""
from __future__ import annotations

from bisect import bisect_right
from typing import Optional, Sequence

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QScrollArea, QSizePolicy, QWidget

from ..plots.common import SELECTED, UNKNOWN_EDGE, UNKNOWN_FILL, UNKNOWN_INK

PAD_X, PAD_Y, GAP, LINE_GAP = 6, 3, 4, 4
GENERATED_FILL, GENERATED_EDGE = "#e3f4e1", "#3a8f3a"     # tokens the model appended
MAX_MEASURED = 20_000       # box widths remembered (piece, id) before the memory starts again


class TokenStrip(QWidget):
    tokenClicked = Signal(int)
    heightChanged = Signal(int)

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.labels: list[str] = []
        self.ids: list[int] = []
        self.special: list[bool] = []
        self.generated: list[bool] = []           # appended by generation, not typed
        self.unknown: list[bool] = []             # outside the vocabulary: the unknown token
        self.selected = -1
        self.piece_font = QFont()
        self.piece_font.setPointSize(10)
        self.id_font = QFont()
        self.id_font.setPointSize(8)
        self.boxes: list[QRectF] = []
        self._widths: dict[tuple[str, int], float] = {}     # (piece, id) -> box width
        self._line_tops: list[float] = []      # y of each line of boxes
        self._line_starts: list[int] = []      # index of each line's first box
        self._laid_out_width = -1
        self._styles: dict[tuple, tuple] = {}
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.setToolTip("Click a token to select it in every plot")

    def set_tokens(self, labels: Sequence[str], ids: Sequence[int], special: Sequence[bool],
                   selected: int, generated: Optional[Sequence[bool]] = None,
                   unknown: Optional[Sequence[bool]] = None) -> None:
        self.labels, self.ids, self.special = list(labels), [int(i) for i in ids], [bool(s) for s in special]
        self.generated = [bool(g) for g in generated] if generated is not None else [False] * len(self.ids)
        self.unknown = [bool(u) for u in unknown] if unknown is not None else [False] * len(self.ids)
        self.selected = selected
        self._layout()
        self.update()

    def set_selected(self, index: int) -> None:
        for i in (self.selected, index):          # only the two boxes whose colours change
            if 0 <= i < len(self.boxes):
                self.update(self.boxes[i].adjusted(-1, -1, 1, 1).toAlignedRect())
        self.selected = index

    def _box_width(self, label: str, token_id: int, piece_metrics: QFontMetrics,
                   id_metrics: QFontMetrics) -> float:
        key = (label, token_id)
        width = self._widths.get(key)
        if width is None:
            if len(self._widths) >= MAX_MEASURED:
                self._widths.clear()
            width = self._widths[key] = max(piece_metrics.horizontalAdvance(label),
                                            id_metrics.horizontalAdvance(str(token_id))) + 2 * PAD_X
        return width

    def _layout(self) -> None:
        piece_metrics, id_metrics = QFontMetrics(self.piece_font), QFontMetrics(self.id_font)
        height = piece_metrics.height() + id_metrics.height() + 2 * PAD_Y
        width_available = max(self.width(), 200)
        x, y = 0.0, 0.0
        self.boxes, self._line_tops, self._line_starts = [], [], []
        for i, (label, token_id) in enumerate(zip(self.labels, self.ids)):
            width = self._box_width(label, token_id, piece_metrics, id_metrics)
            if x > 0 and x + width > width_available:
                x, y = 0.0, y + height + LINE_GAP
            if x == 0:
                self._line_tops.append(y)
                self._line_starts.append(i)
            self.boxes.append(QRectF(x, y, width, height))
            x += width + GAP
        self._laid_out_width = self.width()
        total = int(y + height) + 2 if self.boxes else height
        if total != self.height():
            self.setFixedHeight(total)          # (a resize of the height only: no new layout)
            self.heightChanged.emit(total)

    def resizeEvent(self, event) -> None:
        if self.width() != self._laid_out_width:
            self._layout()
        super().resizeEvent(event)

    def boxes_in(self, rect: QRectF) -> range:
        """The indices of the boxes on the lines that `rect` crosses (the lines in view)."""
        if not self.boxes:
            return range(0)
        first = max(bisect_right(self._line_tops, rect.top()) - 1, 0)    # (lines above end above it)
        after = bisect_right(self._line_tops, rect.bottom())            # the first line below it
        end = self._line_starts[after] if after < len(self._line_starts) else len(self.boxes)
        return range(self._line_starts[first], end)

    def sizeHint(self) -> QSize:
        return QSize(600, self.height())

    def _style(self, selected: bool, generated: bool, special: bool, unknown: bool = False) -> tuple:
        """(edge pen, fill, piece ink, id ink) of a box, made once per kind of box."""
        key = (selected, generated, special, unknown)
        style = self._styles.get(key)
        if style is None:
            fill = QColor(SELECTED) if selected else QColor(
                GENERATED_FILL if generated else UNKNOWN_FILL if unknown
                else "#eef2f7" if not special else "#e4e4e4")
            pen = QPen(QColor(GENERATED_EDGE if generated else UNKNOWN_EDGE if unknown else "#b8c4d4"),
                       1.4 if generated or unknown else 1)
            if generated:
                pen.setStyle(Qt.PenStyle.DashLine)
            ink = "#fff" if selected else "#666" if special else UNKNOWN_INK if unknown else "#111"
            style = self._styles[key] = (pen, fill, QColor(ink), QColor("#fff" if selected else "#667"))
        return style

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        piece_height = QFontMetrics(self.piece_font).height()
        exposed = QRectF(event.rect())
        for i in self.boxes_in(exposed):
            box = self.boxes[i]
            if not box.intersects(exposed):
                continue
            pen, fill, piece_ink, id_ink = self._style(i == self.selected, self.generated[i], self.special[i],
                                                       self.unknown[i] if i < len(self.unknown) else False)
            painter.setPen(pen)
            painter.setBrush(fill)
            painter.drawRoundedRect(box.adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
            painter.setPen(piece_ink)
            painter.setFont(self.piece_font)
            painter.drawText(QRectF(box.x(), box.y() + PAD_Y, box.width(), piece_height),
                             Qt.AlignmentFlag.AlignCenter, self.labels[i])
            painter.setPen(id_ink)
            painter.setFont(self.id_font)
            painter.drawText(QRectF(box.x(), box.y() + PAD_Y + piece_height, box.width(),
                                    box.height() - piece_height - 2 * PAD_Y),
                             Qt.AlignmentFlag.AlignCenter, str(self.ids[i]))
        painter.end()

    def index_at(self, point) -> Optional[int]:
        for i in self.boxes_in(QRectF(point, point)):
            if self.boxes[i].contains(point):
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
