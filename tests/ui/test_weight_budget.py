"""The weight cache budget is a preference: kept in the settings, applied to the model open and
to every model opened after, and the status bar says what the cache holds."""
from pathlib import Path

from transformer_stepper.io.checkpoint_params import DEFAULT_WEIGHT_BUDGET
from transformer_stepper.ui.weight_budget import KEY, budget_mib

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gguf" / "llama_k.Q4_K_M.gguf"


def test_budget_is_kept_applied_and_shown(qtbot, window, settings):
    assert budget_mib(settings) == DEFAULT_WEIGHT_BUDGET >> 20
    window.session.set_text("The bank of the river.", immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(FIXTURE))
    params = window.session.model.params
    assert params.budget == DEFAULT_WEIGHT_BUDGET
    window.weight_budget.set_budget(2048)
    assert int(settings.value(KEY)) == 2048 and params.budget == 2048 << 20
    held = params.nbytes_widened() / 2**20
    assert held > 0                                       # the traced model's dequantized weights
    assert window.weight_budget.label.text() == f"weights {held:,.0f} / 2,048 MiB"
    window.weight_budget.set_budget(0)                    # nothing kept: freed at once
    assert params.nbytes_widened() == 0 and window.weight_budget.label.text() == "weights 0 / 0 MiB"
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(FIXTURE))                   # a new model gets the preference
    assert window.session.model.params.budget == 0


def test_plain_float32_model_has_no_cache_to_show(qtbot, loaded_window):
    window = loaded_window("gpt2")
    assert window.weight_budget.label.isHidden()
