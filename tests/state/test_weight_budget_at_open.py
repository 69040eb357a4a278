"""The window's weight budget applies from a model's first trace: the open job sets it before
tracing (applied only after, the first pass of a big model ran with the store's default)."""
import numpy as np

from tests.builders import llama_folder
from transformer_stepper.state.jobs import load_and_trace


def test_the_first_trace_runs_within_the_window_budget(tmp_path, monkeypatch):
    folder = llama_folder(tmp_path / "m", dtype="BF16", n_layer=3)
    seen = []
    from transformer_stepper.core.trace.model import Model
    real = Model.trace
    monkeypatch.setattr(Model, "trace", lambda self, *a, **k: seen.append(self.params.budget) or real(self, *a, **k))
    result = load_and_trace(str(folder), "the bank of the river", weight_budget=5_000)
    assert seen == [5_000] and result.model.params.budget == 5_000
    largest = max(np.prod(s) * 4 for s in result.model.params.shapes.values())
    assert result.model.params.nbytes_widened() <= max(5_000, largest)


def test_the_session_opens_a_model_with_its_weight_budget(session, scheduler, tmp_path, monkeypatch):
    folder = llama_folder(tmp_path / "m", dtype="BF16", n_layer=3)
    seen = []
    from transformer_stepper.core.trace.model import Model
    real = Model.trace
    monkeypatch.setattr(Model, "trace", lambda self, *a, **k: seen.append(self.params.budget) or real(self, *a, **k))
    session.weight_budget = 7_000
    session.set_text("the bank of the river", immediate=True)
    session.open_model(str(folder))
    scheduler.run_all()
    assert seen == [7_000] and session.model.params.budget == 7_000
