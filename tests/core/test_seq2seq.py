"""The encoder–decoder pass's invariants: cross-attention reads the memory's k, v computed once,
attends everywhere in the source, and a step computes one position."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from transformer_stepper.core.model.seq2seq import relative_buckets
from transformer_stepper.core.trace.seq2seq_generate import step
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_cross_attention_k_v_are_the_memorys_computed_once():
    model = load_model(FIXTURES / "bart_tiny")
    first = model.trace("The bank of the river.")
    later = step(model, step(model, first))
    assert later.memory_kv is first.memory_kv and later.encoder is first.encoder
    for layer, (k, v) in enumerate(later.memory_kv):
        assert later.decoder.layer("cross_k", layer) is k and later.decoder.layer("cross_v", layer) is v
        assert k.shape == (4, first.encoder.n_seq, 8)


def test_cross_attention_rows_sum_to_one_with_no_causal_mask():
    model = load_model(FIXTURES / "marian_tiny")
    trace = model.trace("She went to the bank to deposit money.", "Sie ging")
    weights = trace.cross_attentions                        # [layer, head, target, source]
    assert weights.shape[2:] == (trace.decoder.n_seq, trace.encoder.n_seq)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert (weights > 0).all()                              # the first target row sees the last source word
    assert np.isinf(trace.decoder.attention_mask[0, 1:]).all()   # self-attention stays causal


def test_relative_buckets_one_way_and_both_ways():
    # T5: bidirectional halves the buckets by sign; one-way (decoder) clamps the future to 0
    both = relative_buckets(1, 5, 2, True, 8, 20)[0]        # query 2, keys 0..4: -2 -1 0 +1 +2
    assert both.tolist() == [2, 1, 0, 5, 6]
    one_way = relative_buckets(1, 5, 2, False, 8, 20)[0]
    assert one_way.tolist() == [2, 1, 0, 0, 0]
    far = relative_buckets(1, 200, 199, False, 8, 20)[0]    # distances 199 .. 0
    assert far[0] == 7 and far.max() == 7 and far[-1] == 0  # beyond max_distance: the last bucket
    assert (np.diff(far) <= 0).all()
