"""The weight cache budget is a preference: by default worked out from the memory free when the
window opens (and the status bar says so), a stored value wins; applied to the model open and to
every model opened after, and the status bar says what the cache holds."""
from pathlib import Path

import pytest

from transformer_stepper.io.free_memory import FreeMemory
from transformer_stepper.ui.settings import weight_budget
from transformer_stepper.ui.settings.weight_budget import KEY

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gguf" / "llama_k.Q4_K_M.gguf"
GiB = 1 << 30


def free_window(request, monkeypatch, free):
    monkeypatch.setattr(weight_budget, "available_memory", lambda: free)
    return request.getfixturevalue("window")


def open_fixture(qtbot, window):
    window.session.set_text("The bank of the river.", immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(FIXTURE))
    return window.session.model.params


def test_default_from_free_memory_then_the_stored_value_wins(qtbot, request, monkeypatch, settings):
    window = free_window(request, monkeypatch, FreeMemory(12 * GiB, "MemAvailable"))
    assert window.weight_budget.mib() == 5 * 1024      # (12 GiB - 1 GiB detail - 1 GiB) / 2
    params = open_fixture(qtbot, window)
    assert params.budget == 5 * GiB
    assert params.nbytes_widened() == 0                   # the pass multiplied from the stored blocks
    params["h.0.mlp.gate.w"]                              # a view reads a weight's numbers: kept
    held = params.nbytes_widened() / 2**20
    assert held > 0
    window.weight_budget.show()
    assert window.weight_budget.label.text() == f"weights {held:,.0f} / 5,120 MiB (default: free memory)"
    assert "12,288 MiB free at start (MemAvailable)" in window.weight_budget.label.toolTip()
    window.weight_budget.set_budget(2048)
    assert int(settings.value(KEY)) == 2048 and params.budget == 2048 << 20
    assert window.weight_budget.label.text() == f"weights {held:,.0f} / 2,048 MiB"
    window.weight_budget.set_budget(0)                    # nothing kept: freed at once
    assert params.nbytes_widened() == 0 and window.weight_budget.label.text() == "weights 0 / 0 MiB"
    params = open_fixture(qtbot, window)                  # a new model gets the preference
    assert params.budget == 0


def test_stored_value_wins_from_the_start(qtbot, request, monkeypatch, settings):
    settings.setValue(KEY, 1024)
    window = free_window(request, monkeypatch, FreeMemory(64 * GiB, "MemAvailable"))
    assert open_fixture(qtbot, window).budget == 1 * GiB
    assert window.weight_budget.label.text().endswith(" / 1,024 MiB")


@pytest.mark.parametrize("detail_mib, expected_mib", [(0, 5 * 1024 + 512), (4096, 3584)])
def test_default_leaves_the_detail_budget_room(request, monkeypatch, settings, detail_mib, expected_mib):
    settings.setValue("detail_budget_mib", detail_mib)
    window = free_window(request, monkeypatch, FreeMemory(12 * GiB, "MemAvailable"))
    assert window.weight_budget.mib() == expected_mib  # (12 - detail - 1) / 2, 256 MiB steps


def test_unknown_free_memory_keeps_768_mib(qtbot, request, monkeypatch):
    window = free_window(request, monkeypatch, None)
    assert open_fixture(qtbot, window).budget == 768 << 20
    assert window.weight_budget.label.text().endswith(" / 768 MiB")
    assert "free memory unknown" in window.weight_budget.label.toolTip()


def test_plain_float32_model_has_no_cache_to_show(qtbot, loaded_window):
    window = loaded_window("gpt2")
    assert window.weight_budget.label.isHidden()
