"""`transformer-stepper export`: every applicable stage rendered offscreen for BERT, GPT-2 and the
built-in model, each file printed; bad input is one `error:` line and exit status 2 with no
half-written file; files of an earlier export are replaced and the output says so."""
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from PySide6.QtGui import QImage

from transformer_stepper.cli import main
from transformer_stepper.core.model import stages
from transformer_stepper.io.loader import load_model

from .conftest import builtin_model_or_skip
from .test_export_render import full_disk

TEXT = "the bank of the river"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def check_export(folder, model_path, stdout, file_format, layer=0, head=0):
    config = load_model(model_path).config
    files = sorted(p.name for p in folder.iterdir())
    lines = stdout.splitlines()
    assert lines[-1].startswith(f"{len(files)} files in {folder} (")
    assert sorted(lines[:-1]) == sorted(f"wrote {folder / f}" for f in files)
    for stage in stages.STAGES:
        mine = [f for f in files if f.startswith(f"{stage.number:02d}-{stage.key}-")]
        assert bool(mine) == stage.available(config), stage.key
        for name in mine:
            if stage.per_head:
                assert name.endswith(f"-L{layer}H{head}.{file_format}"), name
            elif stage.per_layer:
                assert name.endswith(f"-L{layer}.{file_format}"), name
    return files


def test_bert_without_lm_head_skips_prediction_with_a_note(qapp, capsys, fixtures_dir, tmp_path):
    model = fixtures_dir / "bert_tiny"
    out = tmp_path / "figures"                                   # created: its parent exists
    code, stdout, err = run(capsys, "export", "--model", model, "--text", TEXT, "--out", out,
                            "--layer", 1, "--head", 2, "--scale", 0.5)
    assert code == 0, err
    check_export(out, model, stdout, "png", layer=1, head=2)
    assert err == ("note: skipped 12-prediction: bert_tiny has no language-model head\n"
                   "note: skipped 13-logit_lens: bert_tiny has no language-model head\n")
    image = QImage(str(out / "07-softmax-attention_weights-L1H2.png"))
    assert (image.width(), image.height()) == (400, 300)


def test_gpt2_svg_in_a_real_process_with_no_display(tmp_path, fixtures_dir):
    """Also: files of an earlier export are replaced and the line says so; others are left."""
    model = fixtures_dir / "gpt2_tiny_lm"
    out = tmp_path / "o"
    out.mkdir()
    (out / "01-tokenize-token_ids.svg").write_text("earlier")
    (out / "notes.txt").write_text("mine")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}          # no DISPLAY, no QT_QPA_PLATFORM
    result = subprocess.run([sys.executable, "-m", "transformer_stepper", "export", "--model", str(model),
                             "--text", TEXT, "--out", str(out), "--format", "svg", "--head", "3"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    replaced = f"wrote {out / '01-tokenize-token_ids.svg'} (replaced the existing file)"
    assert replaced in result.stdout.splitlines()
    stdout = result.stdout.replace(" (replaced the existing file)", "")
    (out / "notes.txt").unlink()
    files = check_export(out, model, stdout, "svg", head=3)
    for name in files:
        assert ET.parse(out / name).getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_the_builtin_model(qapp, capsys, tmp_path):
    path = builtin_model_or_skip()
    code, stdout, err = run(capsys, "export", "--text", "the bank of the river", "--out", tmp_path,
                            "--scale", 0.25)
    assert code == 0, err
    check_export(tmp_path, path, stdout, "png")


def one_error_line(err):
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("extra, message", [
    (["--layer", "5"], "error: --layer 5: the model has 3 layers (0–2)"),
    (["--head", "-1"], "error: --head -1: the model has 4 heads (0–3)"),
    (["--scale", "0"], "error: --scale 0: must be between 0.25 and 8"),
    (["--scale", "nan"], "error: --scale nan: must be between 0.25 and 8"),
    (["--format", "jpg"], None),
])
def test_bad_arguments(qapp, capsys, fixtures_dir, tmp_path, extra, message):
    out = tmp_path / "out"
    code, stdout, err = run(capsys, "export", "--model", fixtures_dir / "bert_tiny", "--text", TEXT,
                            "--out", out, *extra)
    assert code == 2 and stdout == ""
    line = one_error_line(err)
    if message is not None:
        assert line == message
    assert not out.exists() or not any(out.iterdir())


def test_bad_folders(qapp, capsys, fixtures_dir, tmp_path):
    model = fixtures_dir / "bert_tiny"
    code, _, err = run(capsys, "export", "--model", model, "--text", TEXT, "--out", tmp_path / "a" / "b")
    assert code == 2 and one_error_line(err) == f"error: {tmp_path / 'a'}: folder does not exist"
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, "export", "--model", model, "--text", TEXT, "--out", tmp_path / "file")
    assert code == 2 and one_error_line(err) == f"error: {tmp_path / 'file'}: is a file, not a folder"
    code, _, err = run(capsys, "export", "--model", tmp_path / "nothing", "--text", TEXT, "--out", tmp_path)
    assert code == 2 and str(tmp_path / "nothing") in one_error_line(err)


def test_a_full_disk_is_one_error_line_and_leaves_no_file(qapp, capsys, fixtures_dir, tmp_path, monkeypatch):
    full_disk(monkeypatch)
    code, stdout, err = run(capsys, "export", "--model", fixtures_dir / "gpt2_tiny_lm", "--text", TEXT,
                            "--out", tmp_path, "--scale", 0.25)
    assert code == 2 and stdout == ""
    assert re.fullmatch(rf"error: {re.escape(str(tmp_path))}/01-tokenize-\w+\.png: cannot write "
                        r"\(no space left on device\)", one_error_line(err))
    assert list(tmp_path.iterdir()) == []
