"""Invariants of the Llama-family parts of the forward pass on tiny random models: rotary
positions (pair norms kept, scores depend on relative position only, HF's rotate_half layout,
llama3 / linear frequency scaling), RMSNorm, grouped-query attention, the gated feed-forward,
the sliding window, the untied head and the embedding scale."""
import numpy as np
import pytest

from tests.builders import random_params, tiny_config, tokenizer_for, wrap
from transformer_stepper import Model
from transformer_stepper.core.model import ops
from transformer_stepper.core.model.errors import ModelError

TEXT = "the bank of the river and the money in the bank"


def make(seed: int = 0, **changes) -> Model:
    config = tiny_config("llama", **changes)
    return Model(config, random_params(config, seed), wrap(tokenizer_for("llama")), source="tiny-llama")


@pytest.fixture(scope="module")
def trace():
    return make().trace(TEXT)


def pairs(x):  # [..., d_head] -> [..., d_head/2, 2]: HF's pairs are (i, i + d_head/2)
    half = x.shape[-1] // 2
    return np.stack([x[..., :half], x[..., half:]], axis=-1)


def test_rotation_keeps_every_pair_norm(trace):
    for name in ("q", "k"):
        before, after = trace.layer(f"{name}_unrotated", 1), trace.layer(name, 1)
        np.testing.assert_allclose(np.linalg.norm(pairs(after), axis=-1),
                                   np.linalg.norm(pairs(before), axis=-1), rtol=1e-5, atol=1e-6)
    # position 0 is not turned at all
    np.testing.assert_array_equal(trace.layer("q", 0)[:, 0], trace.layer("q_unrotated", 0)[:, 0])


def test_rotation_turns_each_pair_by_position_times_frequency(trace):
    config = trace.config
    freqs = ops.rope_frequencies(config.d_head, config.rope_theta)
    np.testing.assert_allclose(trace["rope_angles"], np.arange(trace.n_seq)[:, None] * freqs[None], rtol=1e-6)
    before, after = pairs(trace.layer("q_unrotated", 0)), pairs(trace.layer("q", 0))
    turned = np.angle(after[..., 0] + 1j * after[..., 1]) - np.angle(before[..., 0] + 1j * before[..., 1])
    expected = np.broadcast_to(trace["rope_angles"][None], turned.shape)
    np.testing.assert_allclose(np.cos(turned), np.cos(expected), atol=1e-4)
    np.testing.assert_allclose(np.sin(turned), np.sin(expected), atol=1e-4)


def test_score_depends_only_on_relative_position():
    rng = np.random.default_rng(3)
    d_head, theta = 16, 10000.0
    q, k = rng.normal(size=(1, 1, d_head)).astype(np.float32), rng.normal(size=(1, 1, d_head)).astype(np.float32)
    freqs = ops.rope_frequencies(d_head, theta)

    def score(i, j):
        angles = ops.rope_angles(max(i, j) + 1, freqs)
        cos, sin = np.cos(angles), np.sin(angles)
        rq = ops.rotate(np.repeat(q, max(i, j) + 1, axis=1), cos, sin)[0, i]
        rk = ops.rotate(np.repeat(k, max(i, j) + 1, axis=1), cos, sin)[0, j]
        return float(rq @ rk)

    for shift in (0, 1, 7, 30):
        assert score(5 + shift, 2 + shift) == pytest.approx(score(5, 2), rel=1e-4, abs=1e-5)
    assert abs(score(5, 2) - score(5, 4)) > 1e-3, "a different distance gives a different score"


def test_llama3_scaling_keeps_fast_pairs_and_slows_slow_ones():
    plain = ops.rope_frequencies(64, 500000.0)
    scaled = ops.rope_frequencies(64, 500000.0, "llama3", factor=32.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_n_ctx=8192)
    wavelength = 2 * np.pi / plain
    fast, slow = wavelength < 8192 / 4, wavelength > 8192 / 1
    assert fast.any() and slow.any()
    np.testing.assert_array_equal(scaled[fast], plain[fast])
    np.testing.assert_allclose(scaled[slow], plain[slow] / 32, rtol=1e-6)
    middle = ~fast & ~slow
    assert np.all((scaled[middle] < plain[middle]) & (scaled[middle] > plain[middle] / 32))
    np.testing.assert_allclose(ops.rope_frequencies(64, 1e4, "linear", factor=4.0),
                               ops.rope_frequencies(64, 1e4) / 4, rtol=1e-6)


def test_rms_norm_has_unit_root_mean_square_and_no_mean_removed(trace):
    normalized = trace.layer("ln_1_normalized", 0)
    np.testing.assert_allclose(np.sqrt(np.mean(normalized ** 2, axis=-1)), 1.0, rtol=1e-4)
    x = trace.layer("ln_1_in", 0)
    assert np.abs(normalized.mean(-1)).max() > 1e-3, "RMSNorm does not centre"
    ratio = normalized / x
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:, :1], ratio.shape), rtol=1e-4)  # one scale a row


def test_grouped_query_heads_share_their_key_and_value_head(trace):
    config = trace.config
    assert config.group_size == 2 and [config.kv_head_of(h) for h in range(4)] == [0, 0, 1, 1]
    for name in ("k", "v"):
        heads = trace.layer(name, 0)
        np.testing.assert_array_equal(heads[0], heads[1])
        np.testing.assert_array_equal(heads[2], heads[3])
        assert not np.array_equal(heads[0], heads[2])


def test_grouped_query_attention_equals_full_attention_with_repeated_kv_weights():
    gqa = make(seed=4)
    params = dict(gqa.params)
    d_head, config = gqa.config.d_head, gqa.config
    for i in range(config.n_layer):
        for name in ("k", "v"):
            w = params[f"h.{i}.attn.{name}.w"]                      # [d, n_kv * d_head]
            blocks = [w[:, h * d_head:(h + 1) * d_head] for h in range(config.n_kv_heads)]
            params[f"h.{i}.attn.{name}.w"] = np.concatenate(
                [b for b in blocks for _ in range(config.group_size)], axis=1)
    mha = Model(config.replace(n_kv_head=0), params, gqa.tokenizer, source="tiny-mha")
    a, b = gqa.trace(TEXT), mha.trace(TEXT)
    np.testing.assert_allclose(a.hidden_states, b.hidden_states, atol=1e-5)
    np.testing.assert_allclose(a.logits, b.logits, atol=1e-4)


def test_gated_feed_forward_is_down_of_silu_gate_times_up(trace):
    model_params = make().params
    x = trace.layer("mlp_in", 1)
    gate = x @ model_params["h.1.mlp.gate.w"]
    up = x @ model_params["h.1.mlp.up.w"]
    expected = (gate / (1 + np.exp(-gate)) * up) @ model_params["h.1.mlp.proj.w"]
    np.testing.assert_allclose(trace.layer("mlp_out", 1), expected, rtol=1e-4, atol=1e-5)
    # x·W_up; not bit-equal to x @ W: the pass multiplies few rows as (Wᵀ·xᵀ)ᵀ (ops.linear),
    # whose summation order differs in the last bit with some OpenBLAS builds
    np.testing.assert_allclose(trace.layer("mlp_up", 1), up, rtol=1e-5, atol=1e-6)


def test_sliding_window_lets_each_query_see_window_keys_itself_included():
    trace = make(sliding_window=3).trace(TEXT)
    allowed = ~trace.mask
    assert list(allowed.sum(axis=1)) == [min(i + 1, 3) for i in range(trace.n_seq)]
    weights = trace.layer("attn_weights", 0)
    assert np.all(weights[:, ~allowed] == 0)
    no_window = make(sliding_window=0).trace(TEXT)
    assert not np.allclose(trace.hidden_states[-1][-1], no_window.hidden_states[-1][-1])
    # within the window nothing differs
    np.testing.assert_array_equal(trace.hidden_states[:, :3], no_window.hidden_states[:, :3])


def test_untied_head_reads_its_own_matrix_and_the_tied_one_reads_wte():
    untied = make()
    trace = untied.trace(TEXT)
    np.testing.assert_allclose(trace.logits, trace.hidden_states[-1] @ untied.params["lm_head.w"].T,
                               rtol=1e-5, atol=1e-5)
    tied = make(tied_head=True)
    trace = tied.trace(TEXT)
    np.testing.assert_allclose(trace.logits, trace.hidden_states[-1] @ tied.params["wte"].T,
                               rtol=1e-5, atol=1e-5)


def test_embedding_scale_multiplies_the_rows_and_no_position_is_added():
    trace = make(embed_scale=4.0).trace(TEXT)
    np.testing.assert_array_equal(trace["embedding_output"], trace["token_embeddings"] * np.float32(4))
    assert "position_embeddings" not in trace and "embedding_sum" not in trace


def test_bad_head_layouts_are_named():
    with pytest.raises(ModelError, match="n_head=4 is not divisible by n_kv_head=3"):
        tiny_config("llama", n_kv_head=3)
    with pytest.raises(ModelError, match="rotary positions need an even head width"):
        tiny_config("llama", head_dim=7)
    with pytest.raises(ModelError, match="unsupported rope scaling 'ntk'"):
        tiny_config("llama", rope_scaling="ntk")
    with pytest.raises(ModelError, match="rotary_dim=10 must be even and at most the head width 8"):
        tiny_config("llama", rotary_dim=10)
    with pytest.raises(ModelError, match="rope_short_factor needs"):
        tiny_config("llama", rope_scaling="longrope", rope_short_factor=(1.0,), rope_long_factor=(1.0,))
