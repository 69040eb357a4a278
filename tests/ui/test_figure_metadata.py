"""Exported figures say where they came from: PNG text chunks and SVG <metadata> carry the
model, its fingerprint, the text, stage, layer, head, selected token and app version, read back
from the files; the caption line is there only when asked for; Export Trace Data writes the same
facts beside the arrays; `export --session` renders the session's view."""
import json
import re

from PySide6.QtGui import QImage

from transformer_stepper import __version__
from transformer_stepper.cli import main
from transformer_stepper.io.session_file import SessionData, model_fingerprint, to_json
from transformer_stepper.ui.export.metadata import read_png_text

TEXT = "The queen rode to the bank of the river and she was tired"


def _session_file(tmp_path, **view):
    path = tmp_path / "s.stepper"
    path.write_text(to_json(SessionData(None, "built-in", "builtin", TEXT, stage="softmax", **view)),
                    encoding="utf-8")
    return path


def test_png_and_svg_carry_the_facts_and_export_session_renders_its_view(tmp_path, capsys):
    session = _session_file(tmp_path, layer=1, head=1, selected=11)
    # every stage as PNG; as SVG only the softmax stage its facts are read from (the SVG of
    # every stage is tests/ui/test_export_cli.py's)
    for fmt, stages in (("png", []), ("svg", ["--stages", "7"])):
        out = tmp_path / fmt
        assert main(["export", "--session", str(session), "--out", str(out), "--format", fmt, *stages]) == 0
        softmax = next(out.glob(f"07-softmax-*L1H1.{fmt}"))
        data = softmax.read_bytes()
        if fmt == "png":
            facts = read_png_text(data)
        else:
            text = data.decode("utf-8")
            assert "<metadata>" in text
            facts = dict(re.findall(r'<ts:fact name="([^"]+)">([^<]*)</ts:fact>', text))
        assert facts["model"] == "transformer-stepper built-in"
        assert facts["model_fingerprint"] == model_fingerprint(None) == "builtin"
        assert facts["text"] == TEXT and facts["stage"] == "7. Softmax"
        assert (facts["layer"], facts["head"]) == ("1", "1")
        assert facts["selected_token"] == "11 'she'"
        assert facts["app_version"] == f"transformer-stepper {__version__}"
        # the embedding stage does not depend on layer or head, and says so
        embedding = read_png_text(next(out.glob("02-embedding-*.png")).read_bytes()) if fmt == "png" else None
        assert embedding is None or (embedding["layer"], embedding["head"]) == ("—", "—")


def test_export_session_refuses_a_bad_file_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.stepper"
    path.write_text("{}", encoding="utf-8")
    assert main(["export", "--session", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and str(path) in err and "\n" not in err


def test_the_caption_line_is_under_the_figure_only_when_asked(qtbot, loaded_window, tmp_path):
    from transformer_stepper.ui.export import preferences
    from transformer_stepper.ui.export.menu import export_plot
    from transformer_stepper.ui.export.render import ExportOptions

    window = loaded_window("gpt2")
    window.session.set_stage("softmax")
    view = window.stepper.current_view()
    name, item = view.plots()[0]
    options = ExportOptions(format="png", scale=1.0)
    plain = export_plot(view, item, tmp_path / "plain.png", options)
    assert not window.caption_action.isChecked()
    window.caption_action.setChecked(True)
    assert preferences.caption(view)
    captioned = export_plot(view, item, tmp_path / "captioned.png", options)
    a, b = QImage(str(plain)), QImage(str(captioned))
    assert b.width() == a.width() and b.height() > a.height()
    facts = read_png_text(captioned.read_bytes())
    assert facts["stage"] == "7. Softmax" and facts["text"] == window.session.text
    window.caption_action.setChecked(False)


def test_export_trace_data_writes_the_facts_beside_the_arrays(qtbot, loaded_window, tmp_path):
    from transformer_stepper.ui.export.dialogs import start_data_export

    window = loaded_window("gpt2")
    window.session.set_stage("scores")
    export = start_data_export(window, tmp_path / "data", ["npy"])
    assert export.wait(10_000)
    qtbot.waitUntil(lambda: (tmp_path / "data" / "export-facts.json").exists(), timeout=5_000)
    facts = json.loads((tmp_path / "data" / "export-facts.json").read_text(encoding="utf-8"))
    assert facts["stage"] == "6. Scores" and facts["text"] == window.session.text
    assert facts["model_fingerprint"].startswith("sha256:")
    assert any(p.suffix == ".npy" for p in (tmp_path / "data").iterdir())
