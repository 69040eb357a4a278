"""The token strip: one painted widget, laid out once per tokens and width, drawing only the
lines in view, and a click finds the token under it."""
from PySide6.QtCore import QPointF, QRectF

from transformer_stepper.ui.stepper.token_strip import TokenStrip, TokenStripArea


def strip_with(qtbot, n: int) -> TokenStrip:
    area = TokenStripArea()
    qtbot.addWidget(area)
    area.resize(600, 200)
    area.show()
    strip = area.strip
    labels = [f"w{i % 17}" * (1 + i % 3) for i in range(n)]
    strip.set_tokens(labels, list(range(1000, 1000 + n)), [i == 0 for i in range(n)], selected=3)
    return strip


def test_every_point_of_a_box_finds_its_token_and_lines_in_view_are_drawn(qtbot):
    strip = strip_with(qtbot, 512)
    assert len(strip.boxes) == 512 and strip.height() > 20 * strip.boxes[0].height()
    for i in (0, 1, 37, 255, 511):
        box = strip.boxes[i]
        assert strip.index_at(box.center()) == i
        assert strip.index_at(QPointF(box.left() + 1, box.top() + 1)) == i
    assert strip.index_at(QPointF(strip.width() + 50, 5)) is None
    # a rect over some lines: exactly the boxes that meet it (and a line more at most)
    view = QRectF(0, strip.boxes[200].top() + 2, strip.width(), 2 * strip.boxes[0].height())
    drawn = strip.boxes_in(view)
    meeting = [i for i, box in enumerate(strip.boxes) if box.intersects(view)]
    assert set(meeting) <= set(drawn) and len(drawn) < 4 * len(meeting)


def test_the_layout_follows_the_width_and_keeps_the_measured_widths(qtbot):
    strip = strip_with(qtbot, 200)
    lines_wide = len({box.top() for box in strip.boxes})
    measured = dict(strip._widths)
    strip.parentWidget().parentWidget().resize(300, 200)          # narrower: more lines
    qtbot.waitUntil(lambda: len({box.top() for box in strip.boxes}) > lines_wide, timeout=5_000)
    assert strip._widths == measured                               # nothing measured again
    assert all(box.right() <= strip.width() + 1 or box.left() == 0 for box in strip.boxes)
