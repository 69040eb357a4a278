"""A causal trace's row blocks: which positions each pass computed together; a layer's detail
computed, grown and cut by them, so that it is bit for bit what those passes computed.

Why: numpy and OpenBLAS need not give the same last bits for a row computed among 10 rows and
among 1,000 (kernels and blocking follow the matrix shapes; np.sum's pairwise order follows a
row's length). A trace extended or re-traced from an earlier one (Model.extend, retrace) holds
rows computed by several passes: the first text's, then each step's new rows, which read the
earlier rows' cached keys and values. A layer's detail is computed the same way, block after
block, each by the same block function over the same rows with the same cached keys, so it is
what the passes that made the residual stream computed; and a layer the earlier trace holds is
*grown* (its rows kept, the step's rows appended, the earlier rows' new columns masked), equal
bit for bit to computing it afresh (tests/core/test_row_blocks.py).

A block is (start, extent): rows start.. computed together by a pass over `extent` positions.
Text deleted after it cuts it: its rows end where the next block starts or the text ends, and
it is computed at its whole extent with zero rows in place of the cut ones. A causal mask
hides those rows from every kept row, so they change no kept number (a zero row's keys are
finite: weight 0), and the matrices have the shapes the pass had."""
from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np

from ..model.config import ModelConfig
from ..model.forward import KVCache, PAIR_NAMES, block, context, later_keys
from .layer_detail import DERIVED
from .recorder import Recorder

Block = tuple[int, int]              # (start, extent)
Blocks = tuple[Block, ...]
Detail = Mapping[str, np.ndarray]

# A pass that would leave FAN blocks of one size class at the end (sizes 1-7, 8-63, 64-511 ...)
# computes them again as one: a layer's detail costs a block function call per block (a
# weight read each: 3-8 ms a layer on GPT-2-small shape), so generating or typing a token at a
# time would otherwise make it ever slower. Amortized, a step computes about log_8(n) rows more.
FAN = 8
# A block cut to fewer rows than its padding (and by more than PAD_ROWS) is computed again.
PAD_ROWS = 64


def ends(blocks: Blocks, n_seq: int) -> list[int]:
    """Where each block's rows end: the next block's start, or the text's end."""
    return [start for start, _ in blocks[1:]] + [n_seq]


def spans(blocks: Blocks, n_seq: int) -> tuple[tuple[int, int, int], ...]:
    """(start, end, extent) of each block: its rows start..end, computed over `extent` positions."""
    return tuple((start, end, extent) for (start, extent), end in zip(blocks, ends(blocks, n_seq)))


def cut(blocks: Blocks, n_seq: int) -> Blocks:
    """The blocks of the first n_seq rows."""
    return tuple(b for b in blocks if b[0] < n_seq)


def appended(blocks: Blocks, start: int, n_seq: int) -> Blocks:
    """The blocks after a pass computed rows start..n_seq together."""
    return cut(blocks, start) + ((start, n_seq),)


def _level(rows: int) -> int:
    return int(math.log(max(rows, 1), FAN) + 1e-9)


def pass_start(blocks: Blocks, shared: int, n_seq: int) -> int:
    """Where a pass should start that keeps the first `shared` rows of a trace with `blocks`
    and computes the rest up to n_seq: `shared`, or the start of the blocks it merges (FAN
    trailing blocks of one size class) or of a block cut mostly away."""
    kept = cut(blocks, shared)
    if not kept or shared >= n_seq:
        return shared
    last_start, extent = kept[-1]
    if extent - shared > max(shared - last_start, PAD_ROWS):
        return last_start
    sizes = [end - start for (start, _), end in zip(kept, ends(kept, shared))] + [n_seq - shared]
    first = len(sizes) - 1          # the index of the block the pass starts with
    while True:
        level = _level(sum(sizes[first:]))
        j = first
        while j > 0 and _level(sizes[j - 1]) <= level:
            j -= 1
        if first - j + 1 < FAN:
            break
        first = j
    return kept[first][0] if first < len(kept) else shared


# -- a layer's detail, block by block ----------------------------------------------------

def layer_detail(params, config: ModelConfig, layer: int, layer_input: np.ndarray,
                 kv_cache: KVCache, blocks: Blocks, n_seq: int) -> dict[str, np.ndarray]:
    """Layer `layer`'s every array over n_seq rows, computed block by block from its stored
    input [n_seq, d_model] and the trace's cached keys and values: what growing the first
    block's arrays by each later block (`grown`) gives, written in place once."""
    out: dict[str, np.ndarray] = {}
    for (start, extent), end in zip(blocks, ends(blocks, n_seq)):
        part = block_detail(params, config, layer, layer_input, kv_cache, start, end, extent)
        if start == 0 and end == extent == n_seq:         # one pass over every row: its arrays
            return part
        if not out:
            out = _allocated(part, n_seq)
        masked = _masked(config, out, part, start, extent)
        placed: set[int] = set()
        for name, new in part.items():
            if id(out[name]) not in placed:
                placed.add(id(out[name]))
                _place(name, out[name], new, start, end, extent, masked.get(name))
    for value in out.values():
        value.flags.writeable = False
    return out


def _allocated(part: Detail, n_seq: int) -> dict[str, np.ndarray]:
    # arrays of the layer's final sizes, shaped like the first block's (aliases: one array)
    out: dict[str, np.ndarray] = {}
    same: dict[int, np.ndarray] = {}
    for name, value in part.items():
        if id(value) not in same:
            shape = list(value.shape)
            shape[value.ndim - 2] = n_seq
            if name in PAIR_NAMES:
                shape[-1] = n_seq
            same[id(value)] = np.empty(shape, dtype=value.dtype)
        out[name] = same[id(value)]
    return out


def _place(name: str, out: np.ndarray, new: np.ndarray, start: int, end: int, extent: int,
           masked: Optional[np.ndarray]) -> None:
    # a block's rows start..end into the layer's arrays (as _grown_array joins them)
    n_new = end - start
    if name in PAIR_NAMES:
        if start:
            out[:, :start, start:end] = masked[:, :, :n_new]
        out[:, start:end, :end] = new[:, :n_new, :end]
        return
    axis = new.ndim - 2
    if start and new.shape[axis] == extent:        # every key so far (k, v)
        out[(slice(None),) * axis + (slice(0, end),)] = _rows(new, axis, end)
    else:
        out[(slice(None),) * axis + (slice(start, end),)] = _rows(new, axis, n_new)


def _masked(config: ModelConfig, detail: Detail, part: Detail, start: int,
            extent: int) -> dict[str, np.ndarray]:
    # the (query, key) arrays' values for the rows before `start` and the block's keys
    pairs = [name for name in part if name in PAIR_NAMES]
    if not start or not pairs:
        return {}
    q, k = detail.get("q"), part.get("k")
    return later_keys(config, None if q is None else np.ascontiguousarray(q[:, :start]),
                      None if k is None else np.ascontiguousarray(k[:, start:extent]),
                      pairs, start, extent - start)


def block_detail(params, config: ModelConfig, layer: int, layer_input: np.ndarray,
                 kv_cache: KVCache, start: int, end: int, extent: int) -> dict[str, np.ndarray]:
    """One block's arrays as its pass recorded them: rows start..extent (zero rows past `end`),
    keys 0..extent, the keys and values before `start` from the cache."""
    x = layer_input[start:end]
    if extent > end:
        x = np.concatenate([x, np.zeros((extent - end, x.shape[1]), dtype=x.dtype)])
    cache = KVCache(config.n_layer)
    if start:
        cache.keys[layer] = kv_cache.keys[layer][:, :start]
        cache.values[layer] = kv_cache.values[layer][:, :start]
    recorder = Recorder()
    block(params, config, np.ascontiguousarray(x), context(config, extent, start=start), layer,
          recorder, cache)
    return {name: values[0] for name, values in recorder.per_layer.items()}


def grown(config: ModelConfig, detail: Detail, part: Detail, start: int, end: int,
          extent: int) -> dict[str, np.ndarray]:
    """`detail` (rows and keys from 0, at least `start` of them; {} before the first block)
    with a block's rows start..end appended -> rows 0..end. `part`: the block's arrays as its
    pass recorded them (rows start..extent, keys 0..extent). Each array grows along its
    position axes: [rows, ...] and [heads, rows, ...] by rows; k and v (every key so far) are
    the block's; the (query, key) arrays (forward.PAIR_NAMES) get the block's rows, and their
    earlier rows' new columns what the pass gives a masked key (forward.later_keys)."""
    derives = _derives(detail)
    part = {name: None if name in derives else value for name, value in part.items()}
    masked = _masked(config, detail, {k: v for k, v in part.items() if v is not None}, start, extent)
    out: dict[str, np.ndarray] = {}
    same: dict[tuple[int, int], np.ndarray] = {}      # aliases (attn_in is ln_1_out) stay one array
    alive = []      # a derived array (layer_detail.py) is made when read: held, its id stays its own
    for name, new in part.items():
        if new is None:                               # derived again by the grown layer
            out[name] = None
            continue
        old = detail.get(name)
        alive.append(old)
        if start and old is None:
            raise KeyError(f"the layer's detail has no {name!r} to grow")
        key = (id(old), id(new))
        if key not in same:
            value = _grown_array(name, old, new, start, end, extent, masked.get(name))
            value.flags.writeable = False
            same[key] = value
        out[name] = same[key]
    return out


def _grown_array(name: str, old: Optional[np.ndarray], new: np.ndarray, start: int, end: int,
                 extent: int, masked: Optional[np.ndarray]) -> np.ndarray:
    axis = new.ndim - 2                           # [rows, ...] or [heads, rows, ...]
    n_new = end - start
    if name in PAIR_NAMES:                        # [heads, rows, keys]
        out = np.empty((new.shape[0], end, end), dtype=new.dtype)
        if start:
            out[:, :start, :start] = old[:, :start, :start]
            out[:, :start, start:] = masked[:, :, :n_new]
        out[:, start:] = new[:, :n_new, :end]
        return out
    if new.shape[axis] == extent:                 # every key so far (k, v), or the first block
        return _rows(new, axis, end, copy=end < new.shape[axis])
    if not start:
        return _rows(new, axis, end, copy=end < new.shape[axis])
    return np.concatenate([_rows(old, axis, start), _rows(new, axis, n_new)], axis=axis)


def _rows(value: np.ndarray, axis: int, n: int, copy: bool = False) -> np.ndarray:
    index = (slice(None),) * axis + (slice(0, n),)
    return value[index].copy() if copy else value[index]


def cut_detail(detail: Detail, n_seq: int) -> dict[str, np.ndarray]:
    """A layer's detail of the first n_seq rows (copied: the longer one can be freed); what
    layer_detail computes for the blocks cut to n_seq, as a block cut short is computed at its
    whole extent."""
    out: dict[str, np.ndarray] = {}
    same: dict[int, np.ndarray] = {}
    alive = []      # a derived array (layer_detail.py) is made when read: held, its id stays its own
    derives = _derives(detail)
    for name in detail:
        if name in derives:                           # derived again by the cut layer
            out[name] = None
            continue
        value = detail[name]
        alive.append(value)
        if id(value) not in same:
            axis = value.ndim - 2
            part = _rows(value, axis, n_seq)
            if name in PAIR_NAMES:
                part = part[..., :n_seq]
            part = part.copy()
            part.flags.writeable = False
            same[id(value)] = part
        out[name] = same[id(value)]
    return out


def _derives(detail) -> tuple[str, ...]:
    # what a layer derives when read (layer_detail.DERIVED; a per-head layer its weights too):
    # a grown or cut layer derives them again from its rows (lean_blocks), so they are not
    # made whole to be cut
    if getattr(detail, "rule", None) is None:
        return ()
    return DERIVED + (("attn_weights",) if detail.per_head else ())


def grow_or_carry(config: ModelConfig, held: Mapping[int, Detail], parts: Mapping[int, Detail],
                  start: int, n_seq: int) -> dict[int, dict[str, np.ndarray]]:
    """Held layers' detail for the trace a pass made by computing rows start..n_seq (the step's
    recorded `parts`), or cut to n_seq when the pass computed nothing (start == n_seq)."""
    if start >= n_seq:
        return {layer: cut_detail(detail, n_seq) for layer, detail in held.items()}
    return {layer: grown(config, detail, parts[layer], start, n_seq, n_seq)
            for layer, detail in held.items() if layer in parts}
