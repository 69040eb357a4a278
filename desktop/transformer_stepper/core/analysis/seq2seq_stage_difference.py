"""One stage of two encoder–decoders' passes over the same source and target, as the
translation window's "A − B" mode shows it: an encoder or decoder stage is the one-stack stage's
difference over that stack's two traces (core/analysis/stage_difference.py); the decoder's
Cross-attention is its arrays A − B at the layer and head shown — q from the decoder stream, k
and v from each model's own encoder output, the scores and weights over the source, the
weighted sum, the output projection and the stream after it.

    shown = seq2seq_stage_difference(trace_a, trace_b, "Decoder", "cross_attention", layer, head)

Pure numpy over two Seq2SeqTraces of the same source and target ids (refused in one line
naming the first differing token of either side): only subtraction."""
from __future__ import annotations

from ..model.errors import ModelError
from ..model.seq2seq_stages import CROSS_ATTENTION
from . import model_diff
from .stage_difference import StageDifference, delta, stage_difference

# the cross-attention's arrays, in the order the block computes them; those per head first
CROSS_PER_HEAD = ("cross_q", "cross_k", "cross_v", "cross_scores_raw", "cross_scores",
                  "cross_attn_weights", "cross_head_outputs")
CROSS_ARRAYS = ("cross_attn_in", *CROSS_PER_HEAD, "cross_heads_concat", "cross_attn_out", "cross_residual")
SOURCE_ROWS = ("cross_k", "cross_v")                                   # rows: source tokens
SOURCE_COLUMNS = ("cross_scores_raw", "cross_scores", "cross_attn_weights")   # columns: source tokens


def check_same_ids(trace_a, trace_b, names=("A", "B")) -> None:
    """A one-line ModelError unless both traces hold the same source and target tokens."""
    for side, a, b in (("source", trace_a.encoder, trace_b.encoder), ("target", trace_a.decoder, trace_b.decoder)):
        try:
            model_diff.check_same_tokens(a.input_ids, a.tokens, b.input_ids, b.tokens, names)
        except ModelError as exc:
            raise ModelError(f"the {side}: {exc}") from None


def seq2seq_stage_difference(trace_a, trace_b, section: str, stage_key: str, layer: int = 0,
                             head: int = 0) -> StageDifference:
    """What `stage_key` of the "Encoder" or "Decoder" computes at `layer` / `head`, A against B
    (reads that layer's detail of both: compute it in a worker)."""
    check_same_ids(trace_a, trace_b)
    if section not in ("Encoder", "Decoder"):
        raise ValueError(f"no section {section!r} (Encoder or Decoder)")
    if stage_key == CROSS_ATTENTION.key:
        if section != "Decoder":
            raise ValueError("the encoder has no cross-attention")
        return cross_attention_difference(trace_a, trace_b, layer, head)
    stack_a, stack_b = ((trace_a.encoder, trace_b.encoder) if section == "Encoder"
                        else (trace_a.decoder, trace_b.decoder))
    return stage_difference(stack_a, stack_b, stage_key, layer, head)


def cross_attention_difference(trace_a, trace_b, layer: int, head: int) -> StageDifference:
    decoder_a, decoder_b = trace_a.decoder, trace_b.decoder
    detail_a, detail_b = decoder_a.detail(layer), decoder_b.detail(layer)
    items = []
    for name in CROSS_ARRAYS:
        if name not in detail_a or name not in detail_b:
            continue
        if name in CROSS_PER_HEAD:
            items.append(delta(name, layer, decoder_a.head_array(name, layer, head),
                               decoder_b.head_array(name, layer, head)))
        else:
            items.append(delta(name, layer, detail_a[name], detail_b[name]))
    return StageDifference(CROSS_ATTENTION.key, layer, head, tuple(items))
