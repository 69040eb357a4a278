"""Stepping through every stage on each family: every view draws from the trace, its plots
are exportable figures, and Left/Right walk the forward pass layer by layer."""
import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt

from transformer_stepper.core.model import stages
from transformer_stepper.ui.stages import VIEWS, create_view

from .conftest import FIXTURE_FAMILIES, HF_FIXTURES, MODELS, builtin_model_or_skip


def walk(session) -> list[tuple[str, int]]:
    """Every (stage, layer) from the first stage to the last, by stepping forward."""
    session.set_stage(stages.STAGES[0].key)
    seen = [(session.stage_key, session.layer)]
    while session.step(+1):
        seen.append((session.stage_key, session.layer))
    return seen


def check_view(view) -> None:
    plots = view.plots()
    assert plots, f"{view.stage_key}: no plots"
    names = [name for name, _ in plots]
    assert len(set(names)) == len(names)
    for name, item in plots:
        assert isinstance(item, (pg.PlotItem, pg.GraphicsLayout)), (view.stage_key, name)
    values, flags = view.explanation_values()
    assert values["n_seq"] == view.session.trace.n_seq


# every Hugging Face family's fixture (tests/fixtures), the round-3 ones with their layer kinds
HF_FAMILIES = {"mistral_tiny": None, "qwen2_tiny": None, "qwen3_tiny": None, "gemma_tiny": None,
               "roberta_tiny": None, "distilbert_tiny": None,
               "gemma2_tiny": ["local (window 4)", "global", "local (window 4)"],
               "gemma3_tiny": ["local (window 4, rope base 10000)"] * 2 + ["global (rope base 1e+06)",
                                                                        "local (window 4, rope base 10000)"],
               "olmo2_tiny": None, "smollm3_tiny": [None, None, None, "no rope"],
               "mixtral_tiny": None, "qwen2_moe_tiny": None, "olmoe_tiny": None,
               "qwen3_moe_tiny": [None, "dense feed-forward", None],
               "gpt_oss_tiny": ["local (window 6)", "global"],
               "deepseek_v2_tiny": ["dense feed-forward", None, None]}
HF_TEXT = "the bank of the river was steep and green"
WALKED = list(MODELS) + list(FIXTURE_FAMILIES) + [n for n in HF_FAMILIES if n not in FIXTURE_FAMILIES]


def views_checked_at(kind: str, n_layer: int) -> list[int]:
    """The layers whose per-layer views are checked: where the walk ends (the last); for the
    Hugging Face families layer 0 too, and 1 where layers differ in kind (local and global:
    Gemma 2/3, rope and NoPE: SmolLM3)."""
    if HF_FAMILIES.get(kind):
        return sorted({0, 1, n_layer - 1})
    return sorted({0, n_layer - 1}) if kind in HF_FAMILIES else [n_layer - 1]


@pytest.mark.parametrize("kind", WALKED)
def test_step_through_every_stage(qtbot, window, loaded_window, kind):
    # one window a family: the walk, every view it reaches, the layer selector and back again
    if kind in HF_FAMILIES:
        window.session.set_text(HF_TEXT, immediate=True)
        with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
            window.open_model(str(HF_FIXTURES / kind))
    else:
        loaded_window(kind)
    session, config = window.session, window.session.model.config
    seen = walk(session)
    per_layer = [s for s in stages.available_stages(config) if s.per_layer]
    expected = len(stages.available_stages(config)) + (config.n_layer - 1) * len(per_layer)
    assert len(seen) == expected
    assert [layer for key, layer in seen if key == "layer_output"] == list(range(config.n_layer))
    assert ("prediction" in {key for key, _ in seen}) == config.lm_head
    for key in {key for key, _ in seen}:
        for layer in views_checked_at(kind, config.n_layer):
            session.set_stage(key)
            if stages.stage(key).per_layer:
                session.set_layer(layer)
            view = window.stepper.current_view()
            assert window.stepper.stack.currentWidget() is view
            assert session.layer == layer or not stages.stage(key).per_layer
            # the logit lens: computed in a worker
            qtbot.waitUntil(lambda: view.is_current() and bool(view.plots()), timeout=10_000)
            check_view(view)
            if key == "scores":      # the soft-cap curve is shown exactly where there is one
                assert ("soft_cap" in [n for n, _ in view.plots()]) == bool(config.attn_softcap), kind
            assert "{" not in window.stepper.explanation.toPlainText(), f"{key}: unfilled placeholder"
            if not stages.stage(key).per_layer:
                break
    assert window.errors == []
    layer_kinds = HF_FAMILIES.get(kind) or [None] * config.n_layer
    texts = [window.layer_box.itemText(i) for i in range(config.n_layer)]
    assert texts == [f"layer {i} of {config.n_layer}" + (f" — {layer_kind}" if layer_kind else "")
                     for i, layer_kind in enumerate(layer_kinds)]
    # and back again to the start
    while session.step(-1):
        pass
    assert session.stage_key == stages.STAGES[0].key


def test_arrow_keys_step_and_cross_into_the_next_layer(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    window.stepper.stage_list.setFocus()
    session.set_stage("layer_output")
    session.set_layer(0)
    qtbot.keyClick(window.stepper.stage_list, Qt.Key.Key_Right)
    assert (session.stage_key, session.layer) == ("qkv", 1)
    qtbot.keyClick(window.stepper.stage_list, Qt.Key.Key_Left)
    assert (session.stage_key, session.layer) == ("layer_output", 0)
    assert window.layer_box.currentIndex() == 0


def test_stage_without_lm_head_is_disabled_and_skipped(qtbot, loaded_window):
    window = loaded_window("bert_nohead")
    row = [s.key for s in stages.STAGES].index("prediction")
    assert not (window.stepper.stage_list.item(row).flags() & Qt.ItemFlag.ItemIsEnabled)
    window.session.set_stage("prediction")
    assert window.session.stage_key != "prediction"


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_every_view_draws_offscreen_without_a_window(qtbot, open_session, kind):
    session = open_session(kind)
    for stage in stages.available_stages(session.model.config):
        view = create_view(stage.key, session)
        qtbot.addWidget(view)
        # not shown, so it redraws when asked; the logit lens is computed in a worker first
        qtbot.waitUntil(lambda: (view.ensure_current(), view.is_current())[1], timeout=10_000)
        check_view(view)
        view.close()
    assert set(VIEWS) == {s.key for s in stages.STAGES}


def test_builtin_model_steps_through_every_stage(qtbot, window):
    builtin_model_or_skip()
    with qtbot.waitSignal(window.session.traceChanged, timeout=30_000):
        window.open_model(None)
    seen = walk(window.session)
    assert len(seen) > len(stages.STAGES) - 2
    for key in {key for key, _ in seen}:
        window.session.set_stage(key)
        qtbot.waitUntil(window.stepper.current_view().is_current, timeout=10_000)
        check_view(window.stepper.current_view())
    assert window.errors == []


def test_layer_and_head_selectors_redraw_per_layer_views(qtbot, loaded_window):
    window = loaded_window("bert")
    session = window.session
    session.set_stage("qkv")
    view = window.stepper.current_view()
    before = np.array(view.q.values)
    window.head_box.setCurrentIndex(2)
    assert session.head == 2
    after_head = np.array(view.q.values)
    assert not np.array_equal(before, after_head)
    np.testing.assert_array_equal(after_head, session.trace["q"][session.layer, 2])
    window.layer_box.setCurrentIndex(1)
    np.testing.assert_array_equal(view.q.values, session.trace["q"][1, 2])


@pytest.mark.parametrize("variant", ["concat", "none", "rotary", "sum_learned"])
def test_the_positions_lab_models_step_through_every_stage_they_have(qtbot, window, variant):
    """The shipped positions-lab models open in the stepper; stages that do not apply (added
    positions for none) are disabled with the reason; rotary shows its rotation, concat [e | p]."""
    from transformer_stepper.io.resources import resources_dir

    with qtbot.waitSignal(window.session.traceChanged, timeout=30_000):
        window.open_model(str(resources_dir() / "positions" / variant))
    config = window.session.model.config
    for key in {key for key, _ in walk(window.session)}:
        window.session.set_stage(key)
        qtbot.waitUntil(window.stepper.current_view().is_current, timeout=10_000)
        check_view(window.stepper.current_view())
    row = [s.key for s in stages.STAGES].index("position_addition")
    item = window.stepper.stage_list.item(row)
    added = config.position != "none"        # rotary shows its rotation there, concat its [e | p]
    assert bool(item.flags() & Qt.ItemFlag.ItemIsEnabled) == added
    # an available stage names its function; one greyed out says why it does not apply
    assert item.toolTip().startswith("computed by transformer_stepper.core.model.forward.embed" if added
                                     else "this model ")
    assert window.errors == []


def test_a_lone_file_with_guessed_settings_is_marked_in_the_window(qtbot, loaded_window, tmp_path):
    """A lone .safetensors opened without config.json: the title and the status bar say the
    settings were guessed, and the model label's tooltip names each guess."""
    import shutil

    from .conftest import HF_FIXTURES

    for file in ("model.safetensors", "tokenizer.json"):
        shutil.copy(HF_FIXTURES / "qwen3_tiny" / file, tmp_path / file)
    window = loaded_window("llama")
    assert "settings guessed" not in window.windowTitle()
    with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
        window.open_model(str(tmp_path / "model.safetensors"))
    assert window.windowTitle().endswith("— settings guessed")
    assert "settings guessed" in window.model_label.text()
    assert "rope_theta=10000.0" in window.model_label.toolTip()
