"""The translation window's Two Models page and its A − B mode: a second encoder–decoder opened
against the window's translator is compared in a worker (both stacks' drift maps, the
cross-attention per head, from core/analysis/seq2seq_diff.py); with A − B on, every stage view of
either stack and the Cross-attention draw trace A's arrays minus trace B's; a translator against
itself draws zeros; one that cannot be compared is refused in one line; Alt-click on a
difference explains it in both models."""
import numpy as np
import pytest

from tests.seq2seq_pairs import FIXTURES, noised_copy
from transformer_stepper.core.analysis import seq2seq_diff
from transformer_stepper.ui.seq2seq.window import TranslationWindow

SOURCE = "The bank of the river."


@pytest.fixture
def window(qtbot):
    w = TranslationWindow(SOURCE)
    qtbot.addWidget(w)
    w.target_box.setText("the river")
    w.open_model(str(FIXTURES / "bart_tiny"))
    qtbot.waitUntil(lambda: w.trace is not None and w.trace.decoder.n_seq > 2, timeout=10000)
    yield w
    w.two.close_other()
    w.workers.wait()


def compared(qtbot, w, path):
    w.compare_with(str(path))
    qtbot.waitUntil(lambda: not w.two.busy and (w.two.result is not None or bool(w.two.message)), timeout=15000)
    return w.two.result


def stage_view(qtbot, w, section, key, layer=1, head=1):
    w.open_cell(section, key, layer, head)

    def drawn_here():        # (the window's view states are remade when the layer's trace comes)
        view = w.views.get((section, key))
        return (view is not None and view.session.layer == layer and view.session.head == head
                and view.showing_difference and view.is_current())
    qtbot.waitUntil(drawn_here, timeout=10000)
    return w.views[(section, key)]


def drawn(view, name):
    return dict(view.difference_mode.panel.figures())[f"difference_{name}"].values


def test_the_page_draws_both_stacks_and_the_cross_attention(qtbot, window, tmp_path):
    assert not window.difference_box.isEnabled()
    result = compared(qtbot, window, noised_copy("bart_tiny", tmp_path / "b"))
    assert window.two.message == "" and window.difference_box.isEnabled()
    page = window.two_page
    assert window.pages.currentWidget() is page
    diff = result.diff
    # (a heatmap holds its values in float32)
    # rows: stages, columns: layers
    np.testing.assert_allclose(page.encoder_map.values, diff.encoder.stage_map(page.encoder_map.stages).T, rtol=1e-6)
    np.testing.assert_allclose(page.decoder_map.values, diff.decoder.stage_map(page.decoder_map.stages).T, rtol=1e-6)
    assert page.decoder_map.stages == tuple(s for s in seq2seq_diff.DECODER_STAGES
                                            if s in diff.decoder.layers[0].stages)
    assert "cross_attn_weights" in page.decoder_map.stages and "attn_weights" in page.encoder_map.stages
    np.testing.assert_allclose(page.cross.values, np.stack([c.divergence for c in diff.cross]), rtol=1e-6)
    assert page.readout.text().startswith("Most drift enters at the ")
    # a cell of the decoder map opens that stage of the decoder at that layer
    row = page.decoder_map.stages.index("cross_attn_weights")
    page.decoder_map.cellClicked.emit(row, 1)
    qtbot.waitUntil(lambda: window.layer == 1, timeout=10000)
    assert window.stage_list.currentItem().text(0).endswith("Cross-attention")


def test_a_minus_b_in_every_stack_and_the_cross_attention(qtbot, window, tmp_path):
    compared(qtbot, window, noised_copy("bart_tiny", tmp_path / "b"))
    window.difference_box.setChecked(True)
    for section, stack in (("Encoder", "encoder"), ("Decoder", "decoder")):
        view = stage_view(qtbot, window, section, "qkv")
        a, b = getattr(window.two.result.trace_a, stack), getattr(window.two.result.trace_b, stack)
        for name in ("q", "k", "v"):
            np.testing.assert_array_equal(drawn(view, name), a.head_array(name, 1, 1) - b.head_array(name, 1, 1))
    view = stage_view(qtbot, window, "Decoder", "feed_forward")
    a, b = window.two.result.trace_a.decoder, window.two.result.trace_b.decoder
    np.testing.assert_array_equal(drawn(view, "mlp_out"), a.layer("mlp_out", 1) - b.layer("mlp_out", 1))
    window.open_cell("Decoder", "cross_attention", 1, 1)
    qtbot.waitUntil(lambda: window.cross_difference is not None and window.pages.currentWidget() is
                    window.cross_difference and not window.cross_difference.panel.isHidden(), timeout=10000)
    page = window.cross_difference
    figures = dict(page.panel.figures())
    for name in ("cross_q", "cross_k", "cross_attn_weights", "cross_head_outputs"):
        np.testing.assert_array_equal(figures[f"difference_{name}"].values,
                                      a.head_array(name, 1, 1) - b.head_array(name, 1, 1))
    np.testing.assert_array_equal(figures["difference_cross_attn_out"].values,
                                  a.layer("cross_attn_out", 1) - b.layer("cross_attn_out", 1))
    assert figures["difference_cross_attn_weights"].values.shape == (a.n_seq, window.trace.encoder.n_seq)
    assert "A − B" in window.status.text()
    # Alt-click a difference: both models' provenance, the summands paired
    figures["difference_cross_head_outputs"].cellClicked.emit(2, 3)
    d = window.provenance_panel.difference
    assert d is not None and window.provenance_panel.address == ("cross_head_outputs", (1, 1, 2, 3))
    assert d.difference == float(a.head_array("cross_head_outputs", 1, 1)[2, 3]) - float(
        b.head_array("cross_head_outputs", 1, 1)[2, 3])
    assert d.n_terms == window.trace.encoder.n_seq
    # off: the cross-attention's own figures again
    window.difference_box.setChecked(False)
    assert window.pages.currentWidget() is window.cross_view


def test_a_translator_against_itself_draws_zeros(qtbot, window):
    compared(qtbot, window, FIXTURES / "bart_tiny")
    diff = window.two.result.diff
    assert np.all(diff.encoder.stage_map() == 0) and all(c.divergence.max() == 0 for c in diff.cross)
    window.difference_box.setChecked(True)
    view = stage_view(qtbot, window, "Decoder", "scores", layer=0, head=2)
    values = drawn(view, "scores")
    assert values.size and np.all(np.nan_to_num(values) == 0.0)
    window.open_cell("Decoder", "cross_attention", 0, 2)
    qtbot.waitUntil(lambda: window.cross_difference is not None and not window.cross_difference.panel.isHidden(),
                    timeout=10000)
    for _, figure in window.cross_difference.panel.figures():
        assert np.all(np.nan_to_num(figure.values) == 0.0)


def test_what_cannot_be_compared_is_refused_in_one_line(qtbot, window):
    compared(qtbot, window, FIXTURES / "t5_tiny")
    assert window.two.result is None and "architectures differ" in window.two.message
    assert window.two_page.readout.text() == window.two.message and "\n" not in window.two.message
    assert window.two_page.details.isHidden() and not window.difference_box.isEnabled()
