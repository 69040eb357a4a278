"""Translation at inference: the encoder once, then the decoder a token at a time from
decoder_start_token_id, each step computing only the new position (Seq2SeqModel.extend: the
self-attention KV cache and the memory's cross-attention k, v are reused), choosing greedily
or by sampling exactly as core/trace/generate.py does for decoders, until EOS."""
from __future__ import annotations

from typing import Optional

from ..model.errors import ModelError
from .generate import Sampling, choose
from .seq2seq_model import Seq2SeqModel, Seq2SeqTrace


def step(model: Seq2SeqModel, trace: Seq2SeqTrace, sampling: Sampling = Sampling(),
         token: Optional[int] = None) -> Seq2SeqTrace:
    """One decoder step: the next target token from the last position's logits (or `token`)."""
    if trace.decoder.n_seq >= model.config.decoder.n_ctx:
        raise ModelError(f"the target is full: the decoder reads at most {model.config.decoder.n_ctx} tokens")
    if token is None:
        token = choose(trace.decoder.logits_at(-1), sampling, trace.decoder.n_seq)
    return model.extend(trace, [token])


def finished(model: Seq2SeqModel, trace: Seq2SeqTrace) -> bool:
    return trace.decoder.n_seq > 1 and int(trace.decoder.input_ids[-1]) == model.config.eos_token_id


def generate(model: Seq2SeqModel, trace: Seq2SeqTrace, n_tokens: int,
             sampling: Sampling = Sampling()) -> list[Seq2SeqTrace]:
    """Up to n_tokens steps from `trace` (a source and the target so far); -> the trace after
    each step. Stops after EOS or when the decoder's positions are full."""
    steps: list[Seq2SeqTrace] = []
    for _ in range(n_tokens):
        if finished(model, trace) or trace.decoder.n_seq >= model.config.decoder.n_ctx:
            break
        trace = step(model, trace, sampling)
        steps.append(trace)
    return steps


def translate(model: Seq2SeqModel, source_text: str, n_tokens: int = 64,
              sampling: Sampling = Sampling()) -> Seq2SeqTrace:
    """The source's translation, greedy by default: the last trace of generate."""
    trace = model.trace(source_text)
    steps = generate(model, trace, n_tokens, sampling)
    return steps[-1] if steps else trace
