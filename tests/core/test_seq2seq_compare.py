"""Compare on the encoder side (core/analysis/seq2seq_compare.py): the same source word in several
sentences through the encoder — identical lookup rows, per-layer cosines from the encoder's own
hidden states (T5's position bias included), equal to the translation pass's encoder."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.analysis.compare import compare
from transformer_stepper.core.analysis.seq2seq_compare import EncoderSide, compare_source
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXTS = ["The bank of the river.", "She went to the bank to deposit money.",
         "The old man counted his money at the bank in the city."]


@pytest.mark.parametrize("name", ("t5_tiny", "bart_tiny", "marian_tiny"))
def test_the_source_word_through_the_encoder(name):
    model = load_model(FIXTURES / name)
    result = compare_source(model, TEXTS, "bank")
    assert len(result.occurrences) == 3
    side = EncoderSide(model)
    for s in result.sentences:
        whole = model.trace(s.text)                 # the translation pass's encoder
        np.testing.assert_array_equal(s.trace.hidden_states, whole.encoder_hidden_states)
    for i in range(3):
        for j in range(i + 1, 3):
            assert result.same_id(i, j)
            np.testing.assert_array_equal(result.lookup_difference(i, j), 0)   # one row of E
    assert result.pair_cosines.shape == (3, model.config.encoder.n_layer + 1)
    occurrence = result.occurrences[0]
    h = result.sentences[0].trace.hidden_states[:, occurrence.position]
    g = result.sentences[1].trace.hidden_states[:, result.occurrences[1].position]
    cos = np.sum(h * g, axis=1) / np.linalg.norm(h, axis=1) / np.linalg.norm(g, axis=1)
    np.testing.assert_allclose(result.pair_cosines[0], cos, atol=1e-5)
    assert side.name.endswith("(encoder)") and compare(side, TEXTS[:2], "bank").occurrences
