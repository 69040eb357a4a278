"""Rendering one figure: PNGs of the requested size that are not blank, SVGs (through Qt's
QSvgGenerator on the installed PySide6) that parse, carry the token labels as text and draw the
same in renderers other than Qt's, a dark theme that is undone afterwards, file names, and the
right-click entries on every plot."""
import errno
import os
import re
import xml.etree.ElementTree as ET

import numpy as np
import PySide6
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage

from transformer_stepper.core.model import stages
from transformer_stepper.io import array_export
from transformer_stepper.ui.export import menu
from transformer_stepper.ui.export.render import (DEFAULT_SIZE, ExportOptions, encode, plot_file_name,
                                                  render, render_png, render_svg)
from transformer_stepper.ui.export.svg import finish
from transformer_stepper.ui.plots.figure import Figure
from transformer_stepper.ui.stages import create_view

SVG = "{http://www.w3.org/2000/svg}"


def pixels(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    data = np.frombuffer(image.constBits(), dtype=np.uint8).reshape(image.height(), image.bytesPerLine())
    rgb = data[:, : image.width() * 4].reshape(image.height(), image.width(), 4)[..., :3]
    step = max(1, image.width() // 800)             # a 4x image: every 4th pixel is plenty
    return rgb[::step, ::step].astype(float)


def plot_of(view, name):
    return dict(view.plots())[name]


@pytest.fixture
def softmax_view(qtbot, open_session):
    session = open_session("gpt2")
    view = create_view("softmax", session)
    qtbot.addWidget(view)
    return view


# ------------------------------------------------------------------------------ PNG
@pytest.mark.parametrize("scale", [1, 2, 4])
def test_png_has_the_requested_size_and_is_not_blank(tmp_path, softmax_view, scale):
    item = plot_of(softmax_view, "attention_weights")
    path = tmp_path / "weights.png"
    path.write_bytes(encode(render(item, ExportOptions(scale=scale))))
    image = QImage(str(path))
    assert not image.isNull()
    assert (image.width(), image.height()) == (DEFAULT_SIZE[0] * scale, DEFAULT_SIZE[1] * scale)
    values = pixels(image)
    assert values.std() > 20                       # heatmap, axes and text, not a flat page
    assert (values < 100).mean() > 0.01            # dark ink: labels and a colour bar
    assert np.array_equal(values[0, 0], [255, 255, 255])   # light background


def test_png_of_every_plot_kind_is_not_blank(qtbot, open_session):
    session = open_session("bert")
    for key in ("tokenize", "position_encoding", "layer_output", "prediction"):
        view = create_view(key, session)
        qtbot.addWidget(view)
        for name, item in view.plots():
            values = pixels(render_png(item, ExportOptions()))
            assert values.std() > 10, (key, name)


def test_dark_background_has_light_ink_and_the_figure_is_restored(softmax_view):
    item = plot_of(softmax_view, "query_weights")
    figure = item.scene().views()[0]
    pen_before = figure.x_axis.pen().color().name()
    title_before = figure.title_label.opts["color"]
    values = pixels(render_png(item, ExportOptions(dark=True)))
    assert values[0, 0].max() < 40                 # dark background
    assert (values.min(axis=2) > 200).mean() > 0.002   # light ink (axis, ticks, title)
    assert figure.x_axis.pen().color().name() == pen_before
    assert figure.title_label.opts["color"] == title_before
    light = pixels(render_png(item, ExportOptions()))
    assert light[0, 0].min() == 255


def test_exporting_at_a_size_restores_the_layout_on_screen(qtbot, softmax_view):
    softmax_view.resize(900, 500)
    softmax_view.show()
    qtbot.waitExposed(softmax_view)
    item = plot_of(softmax_view, "attention_weights")
    before = item.geometry()
    assert (before.width(), before.height()) != DEFAULT_SIZE
    image = render_png(item, ExportOptions(scale=2))
    assert (image.width(), image.height()) == (2 * DEFAULT_SIZE[0], 2 * DEFAULT_SIZE[1])
    assert item.geometry() == before
    shown = render_png(item, ExportOptions(size=None))      # as on screen
    assert (shown.width(), shown.height()) == (round(before.width()), round(before.height()))


# ------------------------------------------------------------------------------ SVG
def test_svg_renders_on_the_installed_pyside6_with_token_labels(softmax_view):
    """pyqtgraph 0.14's SVGExporter fails on PySide6 >= 6.11 (#3485); ours goes through Qt's
    QSvgGenerator. If a PySide6 upgrade breaks that too, this fails."""
    session = softmax_view.session
    item = plot_of(softmax_view, "attention_weights")
    data = encode(render(item, ExportOptions(format="svg"), title="7. Softmax"))
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg", PySide6.__version__
    assert root.get("viewBox") == f"0 0 {DEFAULT_SIZE[0]} {DEFAULT_SIZE[1]}"
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    for label in session.token_labels():
        assert label in texts
    assert any(t.startswith("Attention weights") for t in texts)
    assert "key (the token looked at)" in texts and "weight" in texts     # axis and colour bar
    assert root.find(f"{SVG}title").text == "7. Softmax"
    assert len(list(root.iter(f"{SVG}image"))) >= 2                     # heatmap and colour bar


def _scaling(transform):
    numbers = [float(v) for v in re.findall(r"[-+\d.e]+", transform or "")]
    return len(numbers) == 6 and numbers[:4] != [1.0, 0.0, 0.0, 1.0]


def test_svg_is_portable_no_scaled_cosmetic_strokes_crisp_cells_generic_font(softmax_view):
    raw = render_svg(plot_of(softmax_view, "attention_weights"), ExportOptions(format="svg"))
    assert b"non-scaling-stroke" in raw                     # what Qt writes, and we undo
    root = ET.fromstring(finish(raw))
    for group in root.iter(f"{SVG}g"):
        if _scaling(group.get("transform")):
            assert all(child.get("vector-effect") is None for child in group), group.attrib
    n = softmax_view.session.trace.n_seq
    heatmap = next(image for image in root.iter(f"{SVG}image") if image.get("width") == str(n))
    href = heatmap.get("{http://www.w3.org/1999/xlink}href")
    cells = QImage.fromData(__import__("base64").b64decode(href.split(",", 1)[1]))
    assert cells.width() >= 10 * n                         # enlarged, nearest neighbour
    assert all("sans-serif" in e.get("font-family") for e in root.iter() if e.get("font-family"))


def test_svg_flattening_keeps_the_geometry():
    raw = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100">'
           b'<g stroke="#000" transform="matrix(10,0,0,-5,20,80)">'
           b'<rect vector-effect="non-scaling-stroke" x="1" y="2" width="3" height="4"/>'
           b'<path vector-effect="non-scaling-stroke" d="M0,0 L1,1 C2,2 3,3 4,4 Z"/>'
           b'<polyline vector-effect="non-scaling-stroke" points="0,0 1,2 "/></g>'
           b'<g stroke="#000" transform="matrix(2,0,0,2,0,0)"><path vector-effect="non-scaling-stroke" d="M0,0 A1,1 0 0 1 2,2"/></g>'
           b'</svg>')
    root = ET.fromstring(finish(raw))
    flat, arc = root.findall(f"{SVG}g")
    assert flat.get("transform") is None
    rect, path, polyline = list(flat)
    assert [rect.get(k) for k in ("x", "y", "width", "height")] == ["30", "50", "30", "20"]
    assert path.get("d") == "M20,80 L30,75 C40,70 50,65 60,60 Z"
    assert polyline.get("points") == "20,80 30,70"
    assert arc.get("transform") == "matrix(2,0,0,2,0,0)"     # arcs are left as they are


# ------------------------------------------------------------------------------ names
def test_file_names_carry_stage_number_plot_and_the_layer_head_that_apply():
    assert plot_file_name(stages.stage("softmax"), "attention_weights", 1, 3, "png") == \
        "07-softmax-attention_weights-L1H3.png"
    assert plot_file_name(stages.stage("layer_output"), "layer_output", 1, 3, "svg") == \
        "11-layer_output-layer_output-L1.svg"
    assert plot_file_name(stages.stage("tokenize"), "token_ids", 1, 3, "png") == "01-tokenize-token_ids.png"


# ------------------------------------------------------------------------------ right-click
class _RightClick:
    def __init__(self, item):
        self.acceptedItem = item

    def screenPos(self):
        return QPointF(0, 0)


def test_every_plot_has_png_and_svg_in_its_right_click_menu(qtbot, loaded_window):
    window = loaded_window("bert")
    for key in ("embedding", "softmax", "prediction"):
        window.session.set_stage(key)
        view = window.stepper.current_view()
        for figure in view.findChildren(Figure):
            viewbox = figure.plot.vb
            event = _RightClick(viewbox)
            shown = figure.scene().addParentContextMenus(viewbox, viewbox.getMenu(event), event)
            texts = [a.text() for a in shown.actions()]
            assert "Export as PNG…" in texts and "Export as SVG…" in texts, (key, texts)
            assert "Export..." not in texts             # pyqtgraph's dialog, whose SVG fails


def test_right_click_export_writes_the_default_name_as_shown(qtbot, loaded_window, tmp_path, monkeypatch):
    window = loaded_window("gpt2")
    window.session.set_head(2)
    window.session.set_stage("softmax")
    view = window.stepper.current_view()
    figure = view.weights
    asked = []
    monkeypatch.setattr(menu, "ask_save_path",
                        lambda parent, caption, start, filters: asked.append(start) or str(tmp_path / os.path.basename(start)))
    png, svg = figure.scene().contextMenu
    png.trigger()
    assert os.path.basename(asked[0]) == "07-softmax-attention_weights-L0H2.png"
    image = QImage(str(tmp_path / "07-softmax-attention_weights-L0H2.png"))
    assert image.width() == round(figure.figure.geometry().width()) * 2       # default 2x
    svg.trigger()
    root = ET.parse(tmp_path / "07-softmax-attention_weights-L0H2.svg").getroot()
    assert root.tag == f"{SVG}svg"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["07-softmax-attention_weights-L0H2.png",
                                                          "07-softmax-attention_weights-L0H2.svg"]
    assert window.errors == []


def full_disk(monkeypatch):
    """Every file write fails half-way with ENOSPC (after writing a few bytes)."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def __getattr__(self, name):                 # read, seek, tell, ... (zipfile uses them)
            return getattr(self.handle, name)

        def write(self, data):
            self.handle.write(bytes(data)[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(array_export.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))


def test_a_full_disk_warns_leaves_no_file_and_the_app_keeps_running(qtbot, loaded_window, tmp_path, monkeypatch):
    window = loaded_window("bert")
    window.session.set_stage("softmax")
    figure = window.stepper.current_view().weights
    monkeypatch.setattr(menu, "ask_save_path", lambda *a: str(tmp_path / "w.png"))
    full_disk(monkeypatch)
    figure.scene().contextMenu[0].trigger()
    assert list(tmp_path.iterdir()) == []
    assert window.errors == [f"{tmp_path / 'w.png'}: cannot write (no space left on device)"]
    monkeypatch.undo()
    monkeypatch.setattr(menu, "ask_save_path", lambda *a: str(tmp_path / "w.png"))
    figure.scene().contextMenu[0].trigger()           # and the next try works
    assert [p.name for p in tmp_path.iterdir()] == ["w.png"]


def test_a_missing_folder_is_named(qtbot, loaded_window, tmp_path, monkeypatch):
    window = loaded_window("bert")
    figure = window.stepper.current_view().findChildren(Figure)[0]
    monkeypatch.setattr(menu, "ask_save_path", lambda *a: str(tmp_path / "gone" / "x.svg"))
    figure.scene().contextMenu[1].trigger()
    assert window.errors == [f"{tmp_path / 'gone'}: folder does not exist"]


def _text_positions(root):
    """(text, absolute x, absolute y) of every <text>, through translation-only groups."""
    out = []

    def walk(element, dx, dy):
        numbers = [float(v) for v in re.findall(r"[-+\d.e]+", element.get("transform") or "")]
        if len(numbers) == 6:
            dx, dy = dx + numbers[4], dy + numbers[5]
        if element.tag == f"{SVG}text":
            out.append(("".join(element.itertext()).strip(), dx + float(element.get("x", 0)),
                        dy + float(element.get("y", 0))))
        for child in element:
            walk(child, dx, dy)
    walk(root, 0.0, 0.0)
    return out


def test_long_tick_labels_get_room_on_the_first_paint(qtbot, open_session):
    """An axis learns its labels' width while painting; an export paints once, so it must
    measure first, or long labels (the nearest tokens' names) fall off the figure's edge."""
    session = open_session("bert")
    view = create_view("embedding", session)
    qtbot.addWidget(view)
    view.ensure_current()                   # E's overview and norms: a worker computes them first
    qtbot.waitUntil(lambda: session.workers.active() == 0, timeout=10_000)
    figure = view.nearest
    root = ET.fromstring(encode(render(plot_of(view, "nearest_tokens"), ExportOptions(format="svg"))))
    placed = {text: x for text, x, _ in _text_positions(root)}
    for label in figure.labels:
        assert label in placed and placed[label] >= 0, (label, placed.get(label))
