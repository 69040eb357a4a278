"""Optional live tier: a fresh tiny random model per architecture, built and run by Hugging
Face transformers right now (eager attention), against the app's trace of the saved folder.
Skipped when torch or transformers is not installed; the committed tier needs neither.
torch is imported by the fixture, not at collection, so deselected runs do not pay for it."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from reference_helpers import assert_trace_matches
from transformer_stepper import load_model

pytestmark = pytest.mark.reference

LIVE_SEED = 20240607  # not the committed fixtures' seeds: fresh weights
CLASSES = ("BertModel", "BertForMaskedLM", "GPT2LMHeadModel", "GPT2Model")


@pytest.fixture(scope="module")
def make_fixtures():
    """tests/make_fixtures.py, loaded by path (one recipe for committed and live models),
    with transformers' load reports and progress bars silenced for the module."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = Path(__file__).resolve().parents[1] / "make_fixtures.py"
    spec = importlib.util.spec_from_file_location("make_fixtures_live", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hf_logging = transformers.utils.logging
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    yield module
    hf_logging.enable_progress_bar()
    hf_logging.set_verbosity(verbosity)


@pytest.mark.parametrize("class_name", CLASSES)
def test_live_tiny_model_matches_hugging_face(class_name, make_fixtures, tmp_path):
    family = "bert" if class_name.startswith("Bert") else "gpt2"
    folder = tmp_path / class_name
    make_fixtures.build_tiny(folder, class_name, family, n_layer=2, seed=LIVE_SEED)
    hf_model = make_fixtures.load_eager(folder, make_fixtures.reference_class(class_name))
    texts = (*make_fixtures.TEXTS, "Bank, bank, BANK: the river's bank!")
    reference = make_fixtures.hf_outputs(hf_model, folder / "tokenizer.json", texts)
    model = load_model(folder)
    for t, text in enumerate(texts):
        assert_trace_matches(model.trace(text), reference, t, f"live {class_name} text {t} {text!r}")
