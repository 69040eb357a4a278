"""A causal model's trace grown, edited and cut without running the whole text again:
`extend` (generation), `retrace` (an edited text), `truncate` (undoing generation) and
`shared_rows`, each a function of the model and a trace (Model's methods of those names call
them). The rows two traces share are taken as they are; only the new rows run through the
layers, their keys and values joining the cached ones (core/model/kv_cache.py), the layers'
detail grown or cut block by block (core/trace/row_blocks.py). What a pass hands on to the
trace it makes is one TraceParts.

They read the model's config, params, tokenizer, name and can_generate, and make their traces
by model.assemble_trace, model.trace_encoded and model.checked_ids."""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from . import row_blocks
from ..model.errors import ModelError
from ..model.forward import forward
from ..model.kv_cache import KVCache
from ..model.layer_context import context
from ..model.ops import quiet_floats
from ..model.rotary import rope_length_key
from ..model.tokenize import Encoded
from .recorder import Recorder
from .trace import DEFAULT_DETAIL_BUDGET, PASS_KEPT, Trace


class TraceParts(NamedTuple):
    """What a pass over some rows hands on to the trace made of them."""
    arrays: dict                 # name -> [n_seq, ...] per-token arrays
    residual: dict               # name -> one [n_seq, d_model] array per layer
    kv_cache: KVCache
    ctx: object                  # the whole sequence's layer context (core/model/layer_context.py)
    row_blocks: Optional[tuple]  # the row spans each pass computed (row_blocks.py)
    details: Optional[dict]      # layer -> the LayerDetail grown, cut or recorded for it


def extend(model, trace: Trace, token_ids) -> Trace:
    """The trace of trace's text followed by `token_ids`, computing only the new rows in
    every layer: their keys and values join the cached ones, their queries read all of
    them (the KV cache). Equal, to float rounding, to tracing the whole extended text; the
    given trace is left as it was (undo is keeping it). Every FAN-th step of a size class
    computes its blocks' rows again as one (row_blocks.pass_start); the layer read last (on
    screen) is grown, not recomputed, when trace holds it (row_blocks.grown)."""
    if trace.interventions:
        raise ModelError("generation from an intervened trace is not supported; clear the interventions")
    if not model.can_generate or trace.kv_cache is None:
        raise ModelError(f"{model.name}: only a causal model with an output head can extend a text")
    if trace.config is not model.config:
        raise ModelError("the trace was made by another model")
    new_ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
    start, n_new = trace.n_seq, len(new_ids)
    if n_new == 0:
        return trace
    if start + n_new > model.config.n_ctx:
        raise ModelError(f"the context is full: {start} + {n_new} tokens is more than the "
                         f"model's {model.config.n_ctx}")
    if new_ids.min() < 0 or new_ids.max() >= model.config.n_vocab:
        bad = int(new_ids[(new_ids < 0) | (new_ids >= model.config.n_vocab)][0])
        raise ModelError(f"token id {bad} is outside the model's vocabulary of {model.config.n_vocab}")
    ids = np.concatenate([trace.input_ids, new_ids])
    types = np.concatenate([trace.arrays["token_type_ids"], np.zeros(n_new, dtype=np.int64)])
    first = _pass_start(trace, start, len(ids))
    parts = _continued(model, trace, first, ids, types, ())
    pieces = model.tokenizer.continuation(trace.input_ids, new_ids)
    offsets, text = [], trace.text
    for piece in pieces:
        offsets.append((len(text), len(text) + len(piece)))
        text += piece
    return model.assemble_trace(parts, text=text,
                                tokens=trace.tokens + tuple(model.tokenizer.id_to_token(i) for i in new_ids),
                                input_ids=ids,
                                offsets=np.concatenate([trace.offsets, np.asarray(offsets, dtype=np.int64)]),
                                special_tokens_mask=np.concatenate([trace.special_tokens_mask,
                                                                    np.zeros(n_new, bool)]),
                                detail_budget=trace.cache.budget,
                                generated=np.concatenate([trace.generated, np.ones(n_new, bool)]),
                                computed_rows=len(ids) - first)


def _pass_start(previous: Trace, shared: int, n_seq: int) -> int:
    # where a pass keeping previous's first `shared` rows starts (row_blocks.pass_start)
    if previous.row_blocks is None:
        return shared
    return row_blocks.pass_start(previous.row_blocks, shared, n_seq)


def _continued(model, previous: Trace, start: int, ids: np.ndarray, types: np.ndarray,
               wanted: tuple[int, ...], after_layer=None) -> TraceParts:
    """previous's first `start` rows, then ids[start:] computed after them with the keys
    and values cached, with the whole sequence's context. The layers of `wanted` previous holds (none: the one read
    last) are grown by the rows the pass records for them, or cut when it computes none."""
    n_seq = len(ids)
    if start == previous.n_seq == n_seq:            # the same tokens: the same layers
        return TraceParts(previous.arrays, previous.residual, previous.kv_cache,
                          context(model.config, n_seq), previous.row_blocks, dict(previous.cache.held()))
    held = _held(previous, wanted)
    if not start:                                   # every row again: the pass records them
        return _fresh(model, ids, types, after_layer, tuple(held))
    base = previous if start == previous.n_seq else truncate(model, previous, start, carry=False)
    if start == n_seq:
        return TraceParts(base.arrays, base.residual, base.kv_cache, context(model.config, n_seq),
                          base.row_blocks, row_blocks.grow_or_carry(model.config, held, {}, start, n_seq))
    grown = _grown(model, base, ids[start:], types[start:], after_layer, tuple(held))
    with quiet_floats():
        details = row_blocks.grow_or_carry(model.config, held, grown.details or {}, start, n_seq)
    return grown._replace(details=details)


def _held(previous: Trace, wanted: tuple[int, ...]) -> dict:
    # the layers of previous to grow or cut into the next trace: those of `wanted` it holds
    # (none: the one read last, i.e. on screen); the others are computed when visited
    if previous.row_blocks is None:
        return {}
    held = previous.cache.held()
    wanted = tuple(wanted) or tuple(layer for layer, _ in held[-1:])
    return {layer: detail for layer, detail in held if layer in wanted}


def _grown(model, trace: Trace, new_ids: np.ndarray, types: np.ndarray,
           after_layer: Optional[Callable[[int], None]] = None,
           grow_layers: tuple[int, ...] = ()) -> TraceParts:
    """trace's arrays, residual stream and KV cache with the rows of `new_ids` appended,
    only those computed, with the whole sequence's context; its details: those of
    `grow_layers` the pass recorded for the new rows (None when every row was computed
    afresh)."""
    start, n_new = trace.n_seq, len(new_ids)
    recorder = Recorder(per_layer=PASS_KEPT, detail_layers=grow_layers)
    cache = trace.kv_cache.copy()
    if rope_length_key(model.config, start) != rope_length_key(model.config, start + n_new):
        return _fresh(model, np.concatenate([trace.input_ids, new_ids]),
                      np.concatenate([trace.arrays["token_type_ids"], types]), after_layer)._replace(details=None)
    with quiet_floats():
        step_ctx = context(model.config, start + n_new, recorder, start)
        forward(model.params, model.config, new_ids, types, recorder, ctx=step_ctx, cache=cache,
                logits=False, after_layer=after_layer)
        full_ctx = context(model.config, start + n_new)
    new_arrays, new_residual = recorder.finish()
    new_arrays["token_type_ids"] = types.copy()
    arrays = {name: joined_rows(value, new_arrays[name]) for name, value in trace.arrays.items()
              if name in new_arrays}
    residual = {name: tuple(joined_rows(old, new) for old, new in zip(trace.residual[name], new_residual[name]))
                for name in trace.residual}
    blocks = row_blocks.appended(trace.row_blocks or ((0, start),), start, start + n_new)
    return TraceParts(arrays, residual, cache, full_ctx, blocks, recorder.details)


def _fresh(model, ids: np.ndarray, all_types: np.ndarray, after_layer=None,
           detail_layers: tuple[int, ...] = ()) -> TraceParts:
    """_grown's result computed afresh over every row, with the detail of `detail_layers`:
    the rotary frequencies changed with the length (dynamic, longrope), so the cached keys
    and earlier rows no longer hold (transformers' Phi-3 drops its cache at that step too),
    or the blocks to merge began at the first row."""
    recorder = Recorder(per_layer=PASS_KEPT, detail_layers=detail_layers)
    cache = KVCache(model.config.n_layer)
    with quiet_floats():
        ctx = context(model.config, len(ids), recorder)
        forward(model.params, model.config, ids, all_types, recorder, ctx=ctx, cache=cache,
                logits=False, after_layer=after_layer)
    arrays, residual = recorder.finish()
    arrays["token_type_ids"] = all_types.copy()
    arrays["token_type_ids"].flags.writeable = False
    return TraceParts(arrays, residual, cache, ctx, ((0, len(ids)),), recorder.recorded())


def shared_rows(model, previous: Optional[Trace], encoded: Encoded) -> int:
    """How many leading positions of `encoded` a trace of it can take from `previous`: in a
    causal model a position's every array depends on it and the positions before it alone,
    so where two token sequences begin alike, so do their traces. 0 for an encoder, another
    model's or an intervened trace, or no shared first token."""
    if (previous is None or previous.config is not model.config or previous.kv_cache is None
            or previous.interventions or not model.can_generate):
        return 0
    ids = np.asarray(encoded.input_ids, dtype=np.int64)
    types = np.asarray(encoded.token_type_ids, dtype=np.int64)
    n = min(len(ids), previous.n_seq)
    if rope_length_key(model.config, previous.n_seq) != rope_length_key(model.config, len(ids)):
        return 0                              # other rotary frequencies: no row is the same
    same = (previous.input_ids[:n] == ids[:n]) & (previous.arrays["token_type_ids"][:n] == types[:n])
    return n if same.all() else int(np.argmin(same))


def retrace(model, previous: Optional[Trace], encoded: Encoded, text: str = "",
            detail_layers: tuple[int, ...] = (),
            after_layer: Optional[Callable[[int], None]] = None,
            detail_budget: Optional[int] = None) -> Trace:
    """The trace of `encoded` (an edited text) from `previous`, a trace of this model: the
    positions both begin with (shared_rows) are previous's, cut; the rest run through the
    layers with their keys and values cached, as a generation step does. Typing at the end
    of a long text so computes the new tokens only, and deleting there computes nothing.
    The `detail_layers` whose detail previous holds are grown by the new rows (or cut), not
    recomputed (row_blocks.grown: bit-identical to computing them). Equal to
    `trace_encoded(encoded)` to float rounding (the shared rows were summed in a pass over
    another length); with no shared row (or no `previous`) it is that pass.
    `detail_layers` are ready when it returns. `detail_budget`: bytes of layer detail the
    new trace keeps (None: previous's, else DEFAULT_DETAIL_BUDGET)."""
    ids, types = model.checked_ids(encoded)
    shared = shared_rows(model, previous, encoded)
    if detail_budget is not None:
        budget = detail_budget
    else:
        budget = DEFAULT_DETAIL_BUDGET if previous is None else previous.cache.budget
    start = _pass_start(previous, shared, len(ids)) if shared else 0
    if not start:       # (previous is alive meanwhile: both traces' detail within the budget)
        held = 0 if previous is None else previous.cache.nbytes()
        return model.trace_encoded(encoded, text, budget, detail_layers, after_layer=after_layer,
                                   record_budget=max(budget - held, 0))
    wanted = tuple(layer for layer in detail_layers if 0 <= layer < model.config.n_layer)
    parts = _continued(model, previous, start, ids, types, wanted, after_layer)
    trace = model.assemble_trace(parts, text=text, tokens=encoded.tokens, input_ids=ids.copy(),
                                 offsets=np.asarray(encoded.offsets, dtype=np.int64).copy(),
                                 special_tokens_mask=np.asarray(encoded.special_tokens_mask, bool).copy(),
                                 truncated=encoded.truncated, detail_budget=budget,
                                 computed_rows=len(ids) - start)
    for layer in wanted:
        trace.prepare(layer)
    return trace


def truncate(model, trace: Trace, n_seq: int, carry: bool = True) -> Trace:
    """The trace of trace's first n_seq tokens: undoing generation. In a causal model no row
    depends on a later token, so every array is trace's own rows, cut (copied, so the longer
    trace can be freed), and the cached keys and values are cut likewise; nothing is
    recomputed. The text ends where the first removed token began. With `carry`, the layer
    read last (the one on screen), if trace holds it, is cut too."""
    if not model.can_generate or trace.kv_cache is None:
        raise ModelError(f"{model.name}: only a causal model's trace can be cut to its first tokens")
    if trace.config is not model.config:
        raise ModelError("the trace was made by another model")
    if not 1 <= n_seq <= trace.n_seq:
        raise ModelError(f"cannot cut a trace of {trace.n_seq} tokens to {n_seq}")
    if n_seq == trace.n_seq:
        return trace
    if rope_length_key(model.config, n_seq) != rope_length_key(model.config, trace.n_seq):
        parts = _fresh(model, trace.input_ids[:n_seq], trace.arrays["token_type_ids"][:n_seq])
        parts = parts._replace(details={})
    else:
        cut = lambda value: _frozen_copy(value[:n_seq])                  # noqa: E731
        cache = KVCache(model.config.n_layer, [k[:, :n_seq].copy() for k in trace.kv_cache.keys],
                        [v[:, :n_seq].copy() for v in trace.kv_cache.values])
        residual = {name: tuple(cut(value) for value in values) for name, values in trace.residual.items()}
        arrays = {name: cut(value) for name, value in trace.arrays.items()}
        ctx = context(model.config, n_seq, interventions=trace.interventions)
        blocks = row_blocks.cut(trace.row_blocks or ((0, trace.n_seq),), n_seq)
        details = {}
        if carry:
            details = {layer: row_blocks.cut_detail(d, n_seq) for layer, d in _held(trace, ()).items()}
        parts = TraceParts(arrays, residual, cache, ctx, blocks, details)
    end = int(trace.offsets[n_seq][0]) if trace.offsets[n_seq][1] > 0 else len(trace.text)
    return model.assemble_trace(parts, text=trace.text[:end], tokens=trace.tokens[:n_seq],
                                input_ids=trace.input_ids[:n_seq].copy(), offsets=trace.offsets[:n_seq].copy(),
                                special_tokens_mask=trace.special_tokens_mask[:n_seq].copy(),
                                detail_budget=trace.cache.budget,
                                generated=trace.generated[:n_seq].copy(), computed_rows=0,
                                interventions=trace.interventions)


def _frozen_copy(value: np.ndarray) -> np.ndarray:
    value = value.copy()
    value.flags.writeable = False
    return value


def joined_rows(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    joined = np.concatenate([old, new], axis=0)
    joined.flags.writeable = False
    return joined
