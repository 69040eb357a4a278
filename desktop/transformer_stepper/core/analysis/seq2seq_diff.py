"""Two encoder–decoders (T5, BART, Marian) on the same source and target: where model A drifts
from model B (the reference) in each stack, read from the two exact traces with
core/analysis/model_diff.py's measures. The encoder is compared as a one-stack model (its
hidden states as Hugging Face's encoder_hidden_states: the embedding output, then each block's
output, the last after the final norm where the stack has one); the decoder likewise
(decoder_hidden_states) with its cross-attention besides — the output of the cross-attention
(`cross_attn_out`), its weights over the source as a Jensen–Shannon divergence per head, and
what it adds to the stream's drift — and the output: KL(p_B ‖ p_A) and top-1 agreement per
target position.

What a decoder layer's sub-blocks add: the self-attention from the block's input to the stream
after it (`attn_residual`; post-LN: `ln_1_out`), the cross-attention from there to the stream
after it (`cross_residual`; post-LN: `ln_cross_out`), the feed-forward from there to the block's
output."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..model.errors import ModelError
from ..model.seq2seq import expected_seq2seq_shapes
from . import model_diff
from .model_diff import STAGES, ModelDiff, drift, js_divergence

CROSS_STAGES = ("cross_q", "cross_k", "cross_v", "cross_attn_weights", "cross_head_outputs",
                "cross_attn_out", "cross_residual")
DECODER_STAGES = STAGES[:7] + CROSS_STAGES + STAGES[7:]
CROSS_TITLES = {"cross_q": "cross-attention q", "cross_k": "cross-attention k (from the encoder output)",
                "cross_v": "cross-attention v (from the encoder output)",
                "cross_attn_weights": "cross-attention weights", "cross_head_outputs": "cross-attention head outputs",
                "cross_attn_out": "cross-attention output", "cross_residual": "residual after cross-attention"}


@dataclass(frozen=True)
class CrossDrift:
    layer: int
    divergence: np.ndarray        # [n_head] mean Jensen–Shannon divergence of the rows over the source
    added: float                  # rise of the stream's relative drift across the cross-attention


@dataclass(frozen=True)
class Seq2SeqDiff:
    encoder: ModelDiff            # output None: the encoder has no head
    decoder: ModelDiff            # its layers' stages include the cross-attention's
    cross: tuple[CrossDrift, ...]
    names: tuple[str, str] = ("A", "B")

    def largest_addition(self):
        """(stack, layer, sub-block, rise) adding the most relative drift, or None."""
        best = None
        for stack, diff in (("encoder", self.encoder), ("decoder", self.decoder)):
            found = diff.largest_addition()
            if found is not None and (best is None or found[2] > best[3]):
                best = (stack, *found)
        for cross in self.cross:
            if cross.added > 0 and (best is None or cross.added > best[3]):
                best = ("decoder", cross.layer, "cross-attention", cross.added)
        return best

    def to_json(self) -> dict:
        """The `diff --json` document of an encoder–decoder (docs/model-diff.md)."""
        encoder, decoder = self.encoder.to_json(), self.decoder.to_json()
        for entry in decoder["layers"]:
            stages = self.decoder.layers[entry["layer"]].stages if entry["layer"] < len(self.decoder.layers) else {}
            entry["cross_rel"] = stages["cross_attn_out"].relative if "cross_attn_out" in stages else None
        return {"tokens": encoder["tokens"], "decoder_tokens": decoder["tokens"],
                "embedding": encoder["embedding"], "encoder_layers": encoder["layers"],
                "decoder_embedding": decoder["embedding"], "decoder_layers": decoder["layers"],
                "output": decoder["output"]}


def check_same_seq2seq_shape(config_a, config_b, names=("A", "B")) -> None:
    """A one-line ModelError unless both encoder–decoders have the same tensors and heads."""
    shapes_a, shapes_b = expected_seq2seq_shapes(config_a), expected_seq2seq_shapes(config_b)
    for name in sorted(shapes_a.keys() | shapes_b.keys()):      # the same first offender every run
        if name not in shapes_a or name not in shapes_b:
            has, lacks = (names[0], names[1]) if name in shapes_a else (names[1], names[0])
            raise ModelError(f"{has} has a tensor {name} that {lacks} lacks: the architectures differ")
        if shapes_a[name] != shapes_b[name]:
            raise ModelError(f"tensor {name} is {list(shapes_a[name])} in {names[0]} and "
                             f"{list(shapes_b[name])} in {names[1]}: the architectures differ")
    for stack in ("encoder", "decoder"):
        a, b = getattr(config_a, stack), getattr(config_b, stack)
        if (a.n_head, a.n_kv_heads) != (b.n_head, b.n_kv_heads):
            raise ModelError(f"the {stack} has {a.n_head} heads in {names[0]} and {b.n_head} in "
                             f"{names[1]}: the architectures differ")


def stream_after_cross(config) -> str:
    return "ln_cross_out" if config.norm == "post" else "cross_residual"


def diff_seq2seq(trace_a, trace_b, names=("A", "B"), stages: Sequence[str] = DECODER_STAGES) -> Seq2SeqDiff:
    """Seq2SeqTrace A against B of the same source and target ids (refused in one line
    naming the first differing token of either)."""
    check_same_seq2seq_shape(trace_a.config, trace_b.config, names)
    for side, a, b in (("source", trace_a.encoder, trace_b.encoder), ("target", trace_a.decoder, trace_b.decoder)):
        try:
            model_diff.check_same_tokens(a.input_ids, a.tokens, b.input_ids, b.tokens, names)
        except ModelError as exc:
            raise ModelError(f"the {side}: {exc}") from None
    encoder = model_diff.diff_traces(trace_a.encoder, trace_b.encoder, names=names, shapes_checked=True)
    decoder = model_diff.diff_traces(trace_a.decoder, trace_b.decoder, stages=stages, names=names,
                                     shapes_checked=True)
    layers, cross = [], []
    config = trace_a.decoder.config
    for layer in decoder.layers:
        detail_a = trace_a.decoder.passing_detail(layer.layer)
        detail_b = trace_b.decoder.passing_detail(layer.layer)
        weights_a, weights_b = detail_a["cross_attn_weights"], detail_b["cross_attn_weights"]
        divergence = np.array([js_divergence(np.nan_to_num(weights_a[h]), np.nan_to_num(weights_b[h])).mean()
                               for h in range(weights_a.shape[0])])
        before_name = model_diff.stream_after_attention(config)
        before = drift(detail_a[before_name], detail_b[before_name]).relative
        after_name = stream_after_cross(config)
        after = drift(detail_a[after_name], detail_b[after_name]).relative
        out = drift(trace_a.decoder.residual["layer_out"][layer.layer],
                    trace_b.decoder.residual["layer_out"][layer.layer]).relative
        cross.append(CrossDrift(layer.layer, divergence, after - before))
        layers.append(replace(layer, added_feed_forward=out - after))
    return Seq2SeqDiff(encoder, replace(decoder, layers=tuple(layers)), tuple(cross), tuple(names))
