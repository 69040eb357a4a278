"""Figure and data formats as registries (no Qt): what the menus, dialogs and every --format
read, so adding a format is an entry, not an edit in each place that lists them."""
import dataclasses

import numpy as np
import pytest

from transformer_stepper.cli import main
from transformer_stepper.core.model import stages
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io import array_export, export_formats
from transformer_stepper.io.export_formats import FigureFormat, check_figure_format, figure_format
from transformer_stepper.io.loader import load_model


def test_the_figure_formats_and_what_menus_and_dialogs_show_of_them():
    assert export_formats.figure_format_names() == ("png", "svg")
    assert export_formats.DEFAULT_FIGURE_FORMAT == "png"
    png = figure_format("png")
    assert (png.extension, png.file_filter, png.menu_text) == (".png", "PNG image (*.png)", "Export as PNG…")
    assert figure_format("svg").file_filter == "SVG drawing (*.svg)"
    with pytest.raises(KeyError, match="known: png, svg"):
        figure_format("pdf")


def test_an_unknown_format_is_one_line_listing_those_there_are(monkeypatch):
    check_figure_format("svg")
    with pytest.raises(ModelError, match=r"^--format pdf: must be png or svg$"):
        check_figure_format("pdf")
    monkeypatch.setattr(export_formats, "FIGURE_FORMATS",
                        export_formats.FIGURE_FORMATS + (FigureFormat("pdf", "PDF document"),))
    check_figure_format("pdf")
    with pytest.raises(ModelError, match=r"^--format eps: must be png, svg or pdf$"):
        check_figure_format("eps")


@pytest.mark.parametrize("command", ["export", "compare"])
def test_the_command_line_offers_the_registered_figure_formats(command, capsys):
    assert main([command, "--out", "x", "--text", "a", "--format", "tiff"]) == 2
    assert "invalid choice: 'tiff' (choose from 'png', 'svg')" in capsys.readouterr().err


@pytest.fixture(scope="module")
def gpt2(fixtures_dir):
    model = load_model(fixtures_dir / "gpt2_tiny_lm")
    return model, model.trace("the bank of the river")


def test_data_files_follow_the_registry_order(gpt2):
    model, trace = gpt2
    stage = stages.stage("softmax")
    names = [name for name, _ in array_export.data_files(trace, stage, 1, 0, ["npz", "npy", "csv"])]
    assert names == ["07-softmax-scores-L1H0.csv", "07-softmax-scores-L1H0.npy",
                     "07-softmax-attn_weights-L1H0.csv", "07-softmax-attn_weights-L1H0.npy", "trace.npz"]
    assert [f.name for f in array_export.DATA_FORMATS] == ["csv", "npy", "npz"]


def test_a_data_format_is_one_entry(gpt2, tmp_path, monkeypatch):
    """A per-array format added to the registry is written for every array of the stage."""
    model, trace = gpt2
    text = array_export.DataFormat(
        "txt", "Arrays of {stage} as plain text",
        lambda path, array: array_export.write_bytes(path, np.array2string(array.values).encode()))
    monkeypatch.setattr(array_export, "DATA_FORMATS", array_export.DATA_FORMATS + (text,))
    stage = stages.stage("softmax")
    files = array_export.data_files(trace, stage, 1, 0, ["txt"])
    written = array_export.write_data_files(tmp_path, files)
    assert [p.name for p, _ in written] == ["07-softmax-scores-L1H0.txt", "07-softmax-attn_weights-L1H0.txt"]
    weights = trace.head_array("attn_weights", 1, 0)
    assert (tmp_path / "07-softmax-attn_weights-L1H0.txt").read_text() == np.array2string(weights)


def test_the_dialog_labels_name_the_stage():
    labels = [f.label.format(stage="stage 7 (Softmax, layer 1, head 0)") for f in array_export.DATA_FORMATS]
    assert labels[0] == "Arrays of stage 7 (Softmax, layer 1, head 0) as .csv, tokens on rows and columns"
    assert all(dataclasses.is_dataclass(f) for f in array_export.DATA_FORMATS)
