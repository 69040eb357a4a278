"""Two models on the same text: where model A's forward pass drifts from model B's (a quantized
file against its full-precision twin, a fine-tuned model against its base), read from the two
exact traces, layer by layer and stage by stage. Pure numpy over two traces; no file formats.

For an array's value a (model A) and b (model B, the reference), over every position:

    relative = ‖a − b‖ / ‖b‖               (Frobenius norms, float64 sums)
    cosine   = mean over positions t of cos(a[t], b[t])

a position's vector is the array at that token along its position axis (the second-to-last:
[n_seq, d], [n_head, n_seq, d_head] with the heads side by side, the query rows of
[n_head, n_q, n_k]). Attention weights are also compared as distributions, per head: the
Jensen–Shannon divergence of each query's rows, in nats, averaged over the queries (bounded by
log 2, and finite where one model's weight underflows to 0 and the other's does not). At the
output, per position: KL(p_B ‖ p_A) in nats, whether the two argmaxes agree, and the rank of
each model's top token among the other's logits (1: the other's top too).

`hidden` follows Hugging Face's hidden_states: the embedding output, then every block's
output, the last after the final norm where the model has one. What a sub-block *adds* is the
rise of the residual stream's relative drift across it: the attention from the block's input
to the stream after the attention (`attn_residual`; a post-LN block's `ln_1_out`), the
feed-forward from there to the block's output."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional, Sequence

import numpy as np

from ..model.config import ModelConfig
from ..model.errors import ModelError
from ..trace.layer_detail import PER_HEAD
from ..model.params import expected_shapes

# the per-layer arrays compared (the columns of the layers × stages map), in pass order
STAGES = ("q", "k", "v", "attn_weights", "head_outputs", "attn_out", "attn_residual",
          "mlp_out", "layer_out")
STAGE_TITLES = {"q": "q", "k": "k", "v": "v", "attn_weights": "attention weights",
                "head_outputs": "head outputs", "attn_out": "attention output",
                "attn_residual": "residual after attention", "mlp_out": "feed-forward",
                "layer_out": "block output"}
ROW_BLOCK = 64          # positions of logits widened to float64 at once


@dataclass(frozen=True)
class Drift:
    relative: float            # ‖a − b‖ / ‖b‖ over every position
    cosine: float              # mean over positions of cos(a[t], b[t])
    relative_at: np.ndarray    # [n_seq] ‖a[t] − b[t]‖ / ‖b[t]‖


@dataclass(frozen=True)
class LayerDrift:
    layer: int
    stages: Mapping[str, Drift]          # STAGES name -> Drift (names the family records)
    attention_divergence: np.ndarray     # [n_head] mean Jensen–Shannon divergence per query
    added_attention: float               # rise of the stream's relative drift across attention
    added_feed_forward: float            # ... across the feed-forward


@dataclass(frozen=True)
class OutputDrift:
    kl_at: np.ndarray           # [n_seq] KL(p_B ‖ p_A), nats
    top_a: np.ndarray           # [n_seq] argmax of A's logits
    top_b: np.ndarray           # [n_seq] argmax of B's logits
    rank_of_a_top_in_b: np.ndarray   # [n_seq] 1-based rank of A's top token among B's logits
    rank_of_b_top_in_a: np.ndarray   # [n_seq]

    @property
    def kl(self) -> float:
        return float(self.kl_at.mean())

    @property
    def top1_agree_at(self) -> np.ndarray:
        return self.top_a == self.top_b

    @property
    def top1_agree(self) -> float:
        return float(self.top1_agree_at.mean())


@dataclass(frozen=True)
class ModelDiff:
    input_ids: np.ndarray
    hidden: tuple[Drift, ...]               # n_layer + 1: HF's hidden_states convention
    layers: tuple[LayerDrift, ...]          # the layers whose detail was compared
    output: Optional[OutputDrift]           # None: a model without an output head
    final_norm: Optional[Drift] = None      # the final norm's output (where the model has one)
    names: tuple[str, str] = ("A", "B")

    @property
    def embedding(self) -> Drift:
        return self.hidden[0]

    def token_drift(self) -> np.ndarray:
        """[n_layer + 1, n_seq]: each token's relative drift along the depth (hidden states)."""
        return np.stack([drift.relative_at for drift in self.hidden])

    def stage_map(self, stages: Sequence[str] = STAGES) -> np.ndarray:
        """[n_layer, len(stages)] relative drift; NaN where a family records no such array."""
        out = np.full((len(self.layers), len(stages)), np.nan)
        for row, layer in enumerate(self.layers):
            for column, name in enumerate(stages):
                if name in layer.stages:
                    out[row, column] = layer.stages[name].relative
        return out

    def largest_addition(self) -> Optional[tuple[int, str, float]]:
        """(layer, "attention" or "feed-forward", rise) of the sub-block that adds the most
        relative drift to the residual stream; None when no layer was compared or none adds any."""
        best = None
        for layer in self.layers:
            for part, rise in (("attention", layer.added_attention), ("feed-forward", layer.added_feed_forward)):
                if best is None or rise > best[2]:
                    best = (layer.layer, part, rise)
        return best if best is not None and best[2] > 0 else None

    def to_json(self) -> dict:
        """The `diff --json` document (numbers as plain floats)."""
        layers = []
        for i, hidden in enumerate(self.hidden[1:]):
            entry = {"layer": i, "hidden_rel": hidden.relative, "hidden_cos": hidden.cosine}
            stages = self.layers[i].stages if i < len(self.layers) else {}
            entry["attn_rel"] = stages["attn_out"].relative if "attn_out" in stages else None
            entry["mlp_rel"] = stages["mlp_out"].relative if "mlp_out" in stages else None
            layers.append(entry)
        out = {"tokens": [int(i) for i in self.input_ids],
               "embedding": {"hidden_rel": self.embedding.relative, "hidden_cos": self.embedding.cosine},
               "layers": layers}
        out["output"] = (None if self.output is None else
                         {"kl": self.output.kl, "top1_agree": self.output.top1_agree})
        return out


# ---------------------------------------------------------------- refusing what cannot be compared
def check_same_shape(config_a: ModelConfig, config_b: ModelConfig, names=("A", "B")) -> None:
    """Raise a one-line ModelError unless the two models have the same parameters and shapes."""
    shapes_a, shapes_b = expected_shapes(config_a), expected_shapes(config_b)
    for name in shapes_a.keys() | shapes_b.keys():
        if name not in shapes_b or name not in shapes_a:
            has, lacks = (names[0], names[1]) if name in shapes_a else (names[1], names[0])
            raise ModelError(f"{has} has a tensor {name} that {lacks} lacks: the architectures differ")
    for name, shape in shapes_a.items():
        if shapes_b[name] != shape:
            raise ModelError(f"tensor {name} is {list(shape)} in {names[0]} and {list(shapes_b[name])} "
                             f"in {names[1]}: the architectures differ")
    if config_a.n_head != config_b.n_head or config_a.n_kv_heads != config_b.n_kv_heads:
        raise ModelError(f"{names[0]} has {config_a.n_head} heads ({config_a.n_kv_heads} K/V), {names[1]} "
                         f"{config_b.n_head} ({config_b.n_kv_heads} K/V): the architectures differ")


def check_same_tokens(ids_a, tokens_a, ids_b, tokens_b, names=("A", "B")) -> None:
    """Raise a one-line ModelError naming the first token where the two tokenizations differ."""
    ids_a, ids_b = np.asarray(ids_a), np.asarray(ids_b)
    n = min(len(ids_a), len(ids_b))
    differ = np.flatnonzero(ids_a[:n] != ids_b[:n])
    if len(differ):
        t = int(differ[0])
        raise ModelError(f"the tokenizers differ at token {t}: {names[0]} gives {tokens_a[t]!r} (id {int(ids_a[t])}), "
                         f"{names[1]} gives {tokens_b[t]!r} (id {int(ids_b[t])})")
    if len(ids_a) != len(ids_b):
        longer, tokens = (names[0], tokens_a) if len(ids_a) > len(ids_b) else (names[1], tokens_b)
        raise ModelError(f"the tokenizers differ at token {n}: {longer} gives {tokens[n]!r}, the other "
                         f"ends the text there ({len(ids_a)} and {len(ids_b)} tokens)")


# ---------------------------------------------------------------- the measures
def positions_first(x: np.ndarray) -> np.ndarray:
    """[..., n_seq, x] -> [n_seq, everything else]: each position's vector, heads side by side."""
    return np.moveaxis(np.asarray(x), -2, 0).reshape(x.shape[-2], -1)


def drift(a: np.ndarray, b: np.ndarray, label: str = "array") -> Drift:
    """A's array against B's (same shape, position axis second-to-last): a head at a time for
    [n_head, n_seq, x] arrays, so float64 copies stay one head's size."""
    if a.shape != b.shape:
        raise ModelError(f"{label}: shape {list(a.shape)} in A and {list(b.shape)} in B")
    if a.ndim == 3:
        return _drift_of(_summed(a[h], b[h]) for h in range(a.shape[0]))
    return _drift_of([_summed(positions_first(a), positions_first(b))])


def heads_drift(detail_a, detail_b, name: str, n_head: int) -> Drift:
    """drift() of a per-head array read a head at a time from two LayerDetails (a derived
    array, such as a long text's attention weights, is never made whole)."""
    return _drift_of(_summed(detail_a.head(name, h), detail_b.head(name, h)) for h in range(n_head))


def _summed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # [n_seq, x] twice -> [4, n_seq] per position: Σ(a − b)², Σa², Σb², Σab in float64
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.stack([np.square(a64 - b64).sum(axis=1), np.square(a64).sum(axis=1),
                     np.square(b64).sum(axis=1), (a64 * b64).sum(axis=1)])


def _drift_of(parts) -> Drift:
    delta_sq, a_sq, b_sq, dot = sum(parts)
    return Drift(norm_ratio(float(delta_sq.sum()), float(b_sq.sum())),
                 float(_cosines(dot, a_sq, b_sq).mean()), _ratios(delta_sq, b_sq))


def norm_ratio(delta_sq: float, reference_sq: float) -> float:
    if delta_sq == 0:
        return 0.0               # identical: exactly 0 even where the reference is 0
    return math.inf if reference_sq == 0 else math.sqrt(delta_sq / reference_sq)


def _ratios(delta_sq: np.ndarray, reference_sq: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(delta_sq / reference_sq)
    return np.where(delta_sq == 0, 0.0, np.where(reference_sq == 0, np.inf, ratio))


def _cosines(dot: np.ndarray, a_sq: np.ndarray, b_sq: np.ndarray) -> np.ndarray:
    # cos per position; two zero vectors agree (1), one zero vector does not (0)
    norms = np.sqrt(a_sq * b_sq)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.where(norms > 0, dot / norms, np.where((a_sq == 0) & (b_sq == 0), 1.0, 0.0))
    return np.clip(cos, -1.0, 1.0)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[..., n_k] two distributions per row -> [...] Jensen–Shannon divergence in nats:
    ½ Σ p log p + ½ Σ q log q − Σ m log m with m = (p + q) / 2 and 0 log 0 = 0 (three
    logarithms of the rows, only where an entry is positive: masked keys cost nothing)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = 0.5 * (p + q)
    return np.maximum(0.5 * (_x_log_x(p) + _x_log_x(q)) - _x_log_x(m), 0.0)


def _x_log_x(p: np.ndarray) -> np.ndarray:
    # Σ p log p over the last axis, 0 log 0 = 0
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return np.einsum("...k,...k->...", p, logs)


def output_drift(logits_a: np.ndarray, logits_b: np.ndarray) -> OutputDrift:
    """[n_seq, n_vocab] twice -> KL(p_B ‖ p_A), top-1 and ranks per position (float64, a block
    of positions at a time)."""
    if logits_a.shape != logits_b.shape:
        raise ModelError(f"logits: shape {list(logits_a.shape)} in A and {list(logits_b.shape)} in B")
    return _output_of(logits_a.shape[0], lambda rows: (logits_a[rows], logits_b[rows]))


def traces_output_drift(trace_a, trace_b) -> OutputDrift:
    """output_drift of two traces' logits, read a block of positions at a time (Trace.logits_at:
    a trace that had not made its whole [n_seq, n_vocab] logits does not keep them)."""
    return _output_of(trace_a.n_seq, lambda rows: (trace_a.logits_at(rows), trace_b.logits_at(rows)))


def _output_of(n: int, read: Callable) -> OutputDrift:
    kl, top_a, top_b = np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64)
    rank_ab, rank_ba = np.empty(n, np.int64), np.empty(n, np.int64)
    for start in range(0, n, ROW_BLOCK):
        rows = slice(start, min(start + ROW_BLOCK, n))
        block_a, block_b = read(rows)
        if block_a.shape != block_b.shape:
            raise ModelError(f"logits: {block_a.shape[-1]} tokens in A's vocabulary, {block_b.shape[-1]} in B's")
        a, b = block_a.astype(np.float64), block_b.astype(np.float64)
        log_a, log_b = _log_softmax(a), _log_softmax(b)
        kl[rows] = np.maximum((np.exp(log_b) * (log_b - log_a)).sum(axis=1), 0.0)
        top_a[rows], top_b[rows] = a.argmax(axis=1), b.argmax(axis=1)
        picked_b = np.take_along_axis(b, top_a[rows, None], axis=1)
        picked_a = np.take_along_axis(a, top_b[rows, None], axis=1)
        rank_ab[rows] = 1 + (b > picked_b).sum(axis=1)
        rank_ba[rows] = 1 + (a > picked_a).sum(axis=1)
    return OutputDrift(kl, top_a, top_b, rank_ab, rank_ba)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


# ---------------------------------------------------------------- two traces
def stream_after_attention(config: ModelConfig) -> str:
    """The residual stream once the attention sub-block is done (post-LN: after its norm)."""
    return "ln_1_out" if config.norm == "post" and not config.parallel_residual else "attn_residual"


def layer_drift(trace_a, trace_b, layer: int, stages: Sequence[str] = STAGES) -> LayerDrift:
    """One layer's stages compared (reads that layer's detail in both traces, keeping it only
    where it was held: the layers a view holds stay held)."""
    detail_a, detail_b = trace_a.passing_detail(layer), trace_b.passing_detail(layer)
    n_head = trace_a.config.n_head
    compared = {}
    for name in stages:
        if name in detail_a and name in detail_b:
            compared[name] = (heads_drift(detail_a, detail_b, name, n_head) if name in PER_HEAD else
                              drift(detail_a[name], detail_b[name], f"{name} of layer {layer}"))
    weights = np.zeros(0)
    if "attn_weights" in detail_a and "attn_weights" in detail_b:
        weights = np.array([js_divergence(np.nan_to_num(detail_a.head("attn_weights", h)),
                                          np.nan_to_num(detail_b.head("attn_weights", h))).mean()
                            for h in range(n_head)])
    before = drift(trace_a.residual["layer_in"][layer], trace_b.residual["layer_in"][layer]).relative
    middle_name = stream_after_attention(trace_a.config)
    middle = drift(detail_a[middle_name], detail_b[middle_name]).relative
    after = drift(trace_a.residual["layer_out"][layer], trace_b.residual["layer_out"][layer]).relative
    return LayerDrift(layer, compared, weights, middle - before, after - middle)


def diff_traces(trace_a, trace_b, stages: Sequence[str] = STAGES, detail: bool = True,
                names=("A", "B"), progress: Optional[Callable[[int], None]] = None,
                shapes_checked: bool = False) -> ModelDiff:
    """Trace A against trace B of the same text (B is the reference of every ratio). detail:
    compare every layer's stages too (each layer's detail computed, a full pass's time);
    otherwise only the residual stream and the output. progress(i) after layer i.
    shapes_checked: the caller compared the models' tensors (an encoder–decoder's stacks:
    core/analysis/seq2seq_diff.py)."""
    if not shapes_checked:
        check_same_shape(trace_a.config, trace_b.config, names)
    check_same_tokens(trace_a.input_ids, trace_a.tokens, trace_b.input_ids, trace_b.tokens, names)
    hidden_a, hidden_b = trace_a.hidden_states, trace_b.hidden_states
    hidden = tuple(drift(hidden_a[i], hidden_b[i], f"hidden state {i}") for i in range(len(hidden_a)))
    layers = []
    if detail:
        for layer in range(trace_a.config.n_layer):
            layers.append(layer_drift(trace_a, trace_b, layer, stages))
            if progress is not None:
                progress(layer)
    final = None
    if "final_ln_out" in trace_a.arrays and "final_ln_out" in trace_b.arrays:
        final = drift(trace_a.arrays["final_ln_out"], trace_b.arrays["final_ln_out"], "final norm")
    output = None
    if trace_a.has_logits and trace_b.has_logits:
        output = traces_output_drift(trace_a, trace_b)
    return ModelDiff(np.asarray(trace_a.input_ids), hidden, tuple(layers), output, final, tuple(names))


# ---------------------------------------------------------------- the weights' own error
def weight_errors(params_a: Mapping[str, np.ndarray], params_b: Mapping[str, np.ndarray],
                  names: Sequence[str]) -> Iterator[tuple[str, float]]:
    """(name, ‖W_a − W_b‖ / ‖W_b‖) per tensor, one tensor in memory at a time (a lazy store
    widens it on read), its rows in blocks in float64."""
    for name in names:
        a, b = params_a[name], params_b[name]
        if a.shape != b.shape:
            raise ModelError(f"tensor {name}: shape {list(a.shape)} in A and {list(b.shape)} in B")
        a2, b2 = np.atleast_2d(a), np.atleast_2d(b)
        delta_sq = reference_sq = 0.0
        for start in range(0, a2.shape[0], 1024):
            block_a = a2[start:start + 1024].astype(np.float64)
            block_b = b2[start:start + 1024].astype(np.float64)
            delta_sq += float(np.square(block_a - block_b).sum())
            reference_sq += float(np.square(block_b).sum())
        yield name, norm_ratio(delta_sq, reference_sq)


# ---------------------------------------------------------------- what a readout quotes
@dataclass(frozen=True)
class DiffReadout:
    largest: Optional[tuple[int, str, float]]   # (layer, sub-block, rise)
    final_relative: float                       # the last hidden state's relative drift
    final_cosine: float
    kl: Optional[float]
    top1_agree: Optional[float]
    worst_token: int                            # position with the largest last-layer drift
    worst_token_relative: float


def readout(diff: ModelDiff) -> DiffReadout:
    last = diff.hidden[-1]
    worst = int(np.argmax(last.relative_at)) if len(last.relative_at) else 0
    return DiffReadout(diff.largest_addition(), last.relative, last.cosine,
                       None if diff.output is None else diff.output.kl,
                       None if diff.output is None else diff.output.top1_agree,
                       worst, float(last.relative_at[worst]) if len(last.relative_at) else 0.0)
