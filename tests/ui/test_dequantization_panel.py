"""The dequantization panel of a GGUF model: it prints and draws exactly the numbers of
io/dequantization.readout (codes, scales, formula with numbers, values, grid histogram); a
weight stage's button and a click on a weight cell select that weight's stored block; for a
model that is not GGUF it is disabled and says why."""
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from transformer_stepper.io.gguf.dequantization import readout
from transformer_stepper.io.gguf.weights import place_of

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gguf" / "llama_k.Q4_K_M.gguf"


def _open_gguf(qtbot, window):
    window.session.set_text("The bank of the river.", immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(FIXTURE))
    return window


def test_panel_shows_the_readout_numbers(qtbot, window):
    _open_gguf(qtbot, window)
    session, panel, dock = window.session, window.dequantization_panel, window.dequantization_dock
    window.session.set_stage("qkv")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    button = view.findChild(QPushButton, "dequantize_button")
    assert button.isVisible()
    with qtbot.waitSignal(session.dequantizationRequested):
        button.click()
    assert dock.isVisible() and panel.tensor.currentData() == "blk.0.attn_q.weight"
    panel.select("blk.0.attn_output.weight", 7, 0, 40)
    expected = readout(session.model, "blk.0.attn_output.weight", 7, 0, 40)
    text = " ".join(panel.text.toPlainText().split())          # (HTML folds runs of spaces)
    for part in (expected.numbers, expected.header, expected.formula):
        assert " ".join(part.split()) in text
    assert len(expected.sub_blocks) == 8
    for j, (_, sc, scale, m, low) in enumerate(expected.sub_blocks):
        assert sc == str(int(expected.block.sub_scales[j])) and float(scale) == float(f"{expected.block.scales[j]:.6g}")
        assert f"{j} {sc} {scale} {m} {low}" in text
    np.testing.assert_array_equal(panel.codes.values, expected.codes.astype(np.float32))
    np.testing.assert_array_equal(panel.values.values, expected.values)
    assert all(f.isVisible() for f in (panel.codes, panel.values, panel.histogram))
    np.testing.assert_array_equal(panel.histogram.values, expected.grid[1].astype(np.float32))
    assert panel.readout.value == float(session.model.params["h.0.attn.o.w"][
        next(i for i in range(256) if place_of(session.model, "h.0.attn.o.w", (i, 7)).column == 40), 7])
    panel.codes.click_at(3.0, 2.0)                     # sub-block 2, weight 3: position 67
    assert panel.weight.value() == 2 * 32 + 3 and f"Weight {2 * 32 + 3}" in panel.text.toPlainText()


def test_a_click_on_a_weight_selects_its_block(qtbot, window):
    _open_gguf(qtbot, window)
    session, panel = window.session, window.dequantization_panel
    session.set_stage("embedding")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    with qtbot.waitSignal(session.provenanceRequested):
        view.table.click_at(100.0, 30.0, Qt.KeyboardModifier.AltModifier)     # E[30, 100]
    assert panel.tensor.currentData() == "token_embd.weight"
    assert (panel.row.value(), panel.block.value(), panel.weight.value()) == (30, 0, 100)
    assert panel.readout.value == float(session.model.params["wte"][30, 100])
    e = window.provenance_panel.explanation
    assert e.name == "param:wte" and e.value == e.traced == panel.readout.value


def test_not_gguf_disabled_with_the_reason(qtbot, loaded_window):
    window = loaded_window("llama")
    action = window.dequantization_dock.toggleViewAction()
    assert not action.isEnabled() and "not a GGUF file" in action.toolTip()
    window.session.set_stage("qkv")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    assert not view._dequantize.isVisible()


@pytest.mark.parametrize("file_name, tensor", [("llama_k.Q3_K_M.gguf", "blk.0.attn_q.weight"),
                                               ("llama_k.IQ4_XS.gguf", "blk.0.ffn_up.weight"),
                                               ("llama_small.MXFP4.gguf", "blk.0.attn_k.weight")])
def test_panel_shows_the_newer_types_blocks(qtbot, window, file_name, tensor):
    """Q3_K's offset scales, IQ4_XS's and MXFP4's level tables: the panel prints the readout's
    sub-block table under its own column names and labels the grid with the levels."""
    window.session.set_text("The bank of the river.", immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(FIXTURE.parent / file_name))
    panel = window.dequantization_panel
    panel.select(tensor, 3, 0, 21)
    expected = readout(window.session.model, tensor, 3, 0, 21)
    text = " ".join(panel.text.toPlainText().split())
    assert " ".join(expected.numbers.split()) in text and expected.scales_text in text
    if expected.sub_blocks:
        assert " ".join(expected.sub_headers) in text
        for row in expected.sub_blocks:
            assert " ".join(row) in text
    np.testing.assert_array_equal(panel.codes.values, expected.codes.astype(np.float32))
    np.testing.assert_array_equal(panel.values.values, expected.values)
    assert panel.histogram.labels == list(expected.grid_labels)
    assert all(f.isVisibleTo(panel) for f in (panel.codes, panel.values, panel.histogram))


def test_it_opens_on_a_quantized_weight_the_stage_uses(qtbot, window):
    """A Q4_0 file: the panel opened on blk.0.attn_norm (F32, nothing to dequantize); now on the
    current stage's weight, else the layer's first quantized one; a one-row block's heatmaps tick
    their one sub-block as 0 (they ticked -0.5 ... 0.5)."""
    from transformer_stepper.io.gguf.weights import layer_tensors

    q4 = FIXTURE.parent / "llama_small.Q4_0.gguf"
    session, panel = window.session, window.dequantization_panel
    session.set_stage("feed_forward")
    with qtbot.waitSignal(session.traceChanged, timeout=20_000):
        window.open_model(str(q4))
    kinds = {s.tensor: s.quant_type for s in layer_tensors(session.model, 0)}
    assert kinds["blk.0.attn_norm.weight"] == "F32"
    assert panel.tensor.currentData() == "blk.0.ffn_down.weight" and kinds["blk.0.ffn_down.weight"] == "Q4_0"
    session.set_stage("tokenize")                      # no weight of its own: the first quantized
    with qtbot.waitSignal(session.traceChanged, timeout=20_000):
        window.open_model(str(FIXTURE))
    kinds = {s.tensor: s.quant_type for s in layer_tensors(session.model, 0)}
    first = next(t for t, q in kinds.items() if q not in ("F32", "F16"))
    assert panel.tensor.currentData() == first
    with qtbot.waitSignal(session.traceChanged, timeout=20_000):
        window.open_model(str(q4))
    assert panel.readout is not None and panel.readout.values.shape[0] == 1
    for heatmap in (panel.values, panel.codes):
        assert heatmap.y_axis.tickValues(-0.5, 0.5, 120) == [(1, [0])]


def test_an_experts_tensor_shows_the_selected_tokens_expert(qtbot, window):
    """A mixture-of-experts file: the layer's 3-D experts tensors are listed; the panel shows the
    blocks of one expert's slice, by default the first expert the selected token was routed to
    in this layer, following the token; the expert box picks another."""
    moe = FIXTURE.parents[1] / "gguf_moe" / "qwen3_moe_tiny.Q8_0.gguf"
    session, panel = window.session, window.dequantization_panel
    session.set_text("She went to the bank to deposit money", immediate=True)
    with qtbot.waitSignal(session.traceChanged, timeout=20_000):
        window.open_model(str(moe))
    tensor = "blk.0.ffn_gate_exps.weight"
    assert panel.tensor.findData(tensor) >= 0
    ids = session.trace.layer("expert_ids", 0)
    token = next(t for t in range(1, len(ids)) if ids[t, 0] != ids[0, 0])
    session.select_token(0)
    panel.select(tensor, 2, 0, 5)
    assert panel.expert.isVisibleTo(panel) and panel.expert.value() == ids[0, 0]
    assert panel.expert.maximum() == session.model.config.n_expert - 1

    def shown(expert: int) -> None:
        expected = readout(session.model, tensor, 2, 0, 5, expert)
        np.testing.assert_array_equal(panel.values.values, expected.values)
        np.testing.assert_array_equal(panel.codes.values, expected.codes.astype(np.float32))
        gate = session.model.params[f"h.0.moe.expert.{expert}.gate.w"]      # core [d_model, d_expert]
        np.testing.assert_array_equal(panel.values.values.ravel(), gate[:32, 2])
        assert f"Expert {expert} of {session.model.config.n_expert}" in panel.text.toPlainText()

    shown(int(ids[0, 0]))
    session.select_token(token)                      # another token: its own first expert
    assert panel.expert.value() == ids[token, 0]
    shown(int(ids[token, 0]))
    assert f"went to experts {', '.join(str(int(e)) for e in ids[token])} in this layer" in \
        " ".join(panel.text.toPlainText().split())
    other = (int(ids[token, 0]) + 1) % session.model.config.n_expert
    panel.expert.setValue(other)                     # any expert, chosen or not
    shown(other)
    panel.show_param("h.0.moe.expert.7.up.w", (3, 4))
    assert (panel.tensor.currentData(), panel.expert.value(), panel.row.value()) == \
        ("blk.0.ffn_up_exps.weight", 7, 4)
    panel.select("blk.0.attn_q.weight", 0, 0, 0)     # a 2-D tensor: no expert box
    assert not panel.expert.isVisibleTo(panel) and panel.readout.source.tensor == "blk.0.attn_q.weight"
