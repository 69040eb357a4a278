"""The logit lens a block at a time, on demand: one cache per trace of (hidden state, block of
positions) -> that block's top tokens, shared by the lens view and the prediction stage (the
final hidden state's row is the prediction).

Blocks sit at fixed positions (0–63, 64–127, ...), so a block's numbers depend on its rows of
the head's input and nothing else: BLAS may sum a 3-row product in another order than a 64-row
one, but the same rows through the same product give the same bits. A trace made from another
(a generation step, an edit after an unchanged beginning: core/trace/growth.py extend/retrace) shares
its first rows bit for bit, so a block whose input rows are byte-identical to a block computed
before is taken from a per-model store keyed by a digest of those bytes instead of recomputed;
a partial block (the old text's last, now longer) has other rows and is computed afresh."""
from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Optional

import numpy as np

from ..model import ops
from ..model.errors import ModelError
from ..model.forward import lm_head, norm
from .trace import Trace

# positions at a time: the logits, their softmax and argpartition's int64 indices of
# BLOCK · n_vocab each (~40 MB for GPT-2's vocabulary) are all a block adds
LENS_BLOCK = 64
# blocks a model's store keeps for later traces (~4 KB each at top 5): 16 traces of GPT-2 small
STORE_BLOCKS = 4096


class LensBlock(NamedTuple):
    """One hidden state's lens over one block of positions."""
    ids: np.ndarray                  # [k, top] the most likely tokens, best first
    probabilities: np.ndarray        # [k, top] their probabilities
    final_probabilities: np.ndarray  # [k] the final prediction's probability at this state


@dataclass(frozen=True)
class Lens:
    """The logit lens of a trace: at every hidden state (0 = embedding output, n_layer = the
    last layer), what the model would predict if it stopped there. Assembled from the blocks
    computed so far: where `known` is False the ids are -1 and the probabilities NaN (not yet
    computed, never a number)."""
    ids: np.ndarray                  # [n_layer + 1, n_seq, top] the most likely tokens, best first
    probabilities: np.ndarray        # [n_layer + 1, n_seq, top] their probabilities
    final_ids: np.ndarray            # [n_seq] what the whole model predicts (the last layer's best)
    final_probabilities: np.ndarray  # [n_layer + 1, n_seq] that token's probability at each state
    known: Optional[np.ndarray] = None   # [n_layer + 1, n_seq] bool; None: every cell is known

    @property
    def complete(self) -> bool:
        return self.known is None or bool(self.known.all())


class _Store:
    """A model's computed blocks by the digest of what they read, least recently used first."""

    def __init__(self) -> None:
        self.blocks: "OrderedDict[tuple, LensBlock]" = OrderedDict()

    def get(self, key: tuple) -> Optional[LensBlock]:
        block = self.blocks.get(key)
        if block is not None:
            self.blocks.move_to_end(key)
        return block

    def put(self, key: tuple, block: LensBlock) -> None:
        self.blocks[key] = block
        self.blocks.move_to_end(key)
        while len(self.blocks) > STORE_BLOCKS:
            self.blocks.popitem(last=False)


_lock = threading.RLock()
_stores: "weakref.WeakKeyDictionary[object, _Store]" = weakref.WeakKeyDictionary()
_traces: "weakref.WeakKeyDictionary[Trace, TraceLens]" = weakref.WeakKeyDictionary()


class TraceLens:
    """A trace's lens blocks, computed when asked for (`compute`, in a worker) and read when
    ready (`ready`, `assemble`: cheap, for the GUI thread). Made by `trace_lens`."""

    def __init__(self, model, trace: Trace, top: int) -> None:
        self._model, self._trace = weakref.ref(model), weakref.ref(trace)
        self.n_states, self.n_seq = model.config.n_layer + 1, trace.n_seq
        self.top = min(top, model.config.n_vocab)
        self.n_blocks = -(-self.n_seq // LENS_BLOCK)
        self.blocks: dict[tuple[int, int], LensBlock] = {}
        self._digests: dict[tuple[int, int], bytes] = {}
        self.reused = 0                  # blocks taken from an earlier trace's (the store)
        self._whole: Optional[Lens] = None   # assembled once complete

    # -- what is asked and what is ready (cheap: the GUI thread asks these) -------------------
    def rows(self, block: int) -> slice:
        return slice(block * LENS_BLOCK, min((block + 1) * LENS_BLOCK, self.n_seq))

    def blocks_of(self, first: int, count: int) -> range:
        """The blocks holding positions first .. first + count - 1."""
        first = min(max(first, 0), self.n_seq - 1)
        last = min(max(first + count, first + 1), self.n_seq) - 1
        return range(first // LENS_BLOCK, last // LENS_BLOCK + 1)

    def missing(self, states: Iterable[int], blocks: Iterable[int]) -> list[tuple[int, int]]:
        """(state, block) pairs not computed yet, in the order asked (blocks outer)."""
        states = list(states)
        with _lock:
            return [(s, b) for b in blocks for s in states if (s, b) not in self.blocks]

    def ready(self, states: Iterable[int], blocks: Iterable[int]) -> bool:
        return not self.missing(states, blocks)

    @property
    def complete(self) -> bool:
        with _lock:
            return len(self.blocks) == self.n_states * self.n_blocks

    # -- computing (in a worker) --------------------------------------------------------------
    def compute(self, pieces: Iterable[tuple[int, int]],
                progress: Optional[Callable[[int, int], None]] = None) -> None:
        """Compute (or take from the store) every (state, block) in `pieces`; each block's
        final state first (its best token is what the other states' final_probabilities read).
        `progress(done, total)` after each pair: a worker's cancel stops there (a block of a
        128k vocabulary is ~1 s)."""
        model, trace = self._model(), self._trace()
        if model is None or trace is None:
            return
        pieces = list(pieces)
        for done, (state, block) in enumerate(pieces):
            for needed in ((self.n_states - 1, block), (state, block)):
                with _lock:
                    if needed in self.blocks:
                        continue
                self._fill(model, trace, *needed)
            if progress is not None:
                progress(done + 1, len(pieces))

    def _fill(self, model, trace: Trace, state: int, block: int) -> None:
        final_ids = None if state == self.n_states - 1 else self.blocks[(self.n_states - 1, block)].ids[:, 0]
        key = (self.top, self._digest(trace, state, block), self._digest(trace, self.n_states - 1, block))
        with _lock:
            store = _stores.setdefault(model, _Store())
            known = store.get(key)
        if known is None:
            known = lens_block(model, trace, state, self.rows(block), self.top, final_ids)
        else:
            self.reused += 1
        with _lock:
            store.put(key, known)
            self.blocks[(state, block)] = known

    def _digest(self, trace: Trace, state: int, block: int) -> bytes:
        # what the block reads: its rows of the hidden state (their bytes, shape and dtype)
        digest = self._digests.get((state, block))
        if digest is None:
            rows = np.ascontiguousarray(trace.hidden_states[state][self.rows(block)])
            hasher = hashlib.blake2b(repr((rows.shape, rows.dtype.str)).encode(), digest_size=20)
            hasher.update(memoryview(rows).cast("B"))
            digest = self._digests[(state, block)] = hasher.digest()
        return digest

    # -- reading ------------------------------------------------------------------------------
    def assemble(self) -> Lens:
        """The lens from the blocks computed so far (read-only arrays; `known` marks them)."""
        if self._whole is not None:
            return self._whole
        shape = (self.n_states, self.n_seq)
        ids = np.full(shape + (self.top,), -1, dtype=np.int64)
        probabilities = np.full(shape + (self.top,), np.nan, dtype=np.float32)
        final_probabilities = np.full(shape, np.nan, dtype=np.float32)
        known = np.zeros(shape, dtype=bool)
        with _lock:
            blocks = list(self.blocks.items())
        for (state, block), value in blocks:
            rows = self.rows(block)
            ids[state, rows], probabilities[state, rows] = value.ids, value.probabilities
            final_probabilities[state, rows], known[state, rows] = value.final_probabilities, True
        final_ids = ids[-1, :, 0].copy()
        result = Lens(ids, probabilities, final_ids, final_probabilities, None if known.all() else known)
        for array in (ids, probabilities, final_ids, final_probabilities, known):
            array.flags.writeable = False
        if result.known is None:
            self._whole = result
        return result

    def everything(self) -> list[tuple[int, int]]:
        """Every (state, block) not computed yet."""
        return self.missing(range(self.n_states), range(self.n_blocks))


def next_piece(cache: TraceLens, shown: Iterable[int], size: int) -> list[tuple[int, int]]:
    """The next at most `size` (state, block) pairs to compute: the `shown` blocks' first (a
    view's column window and its selected position's block: every state of them, the final
    first), and only those while any is missing (the view draws when they are done, not a
    piece later); then the others, nearest the shown ones first; [] when the lens is complete."""
    shown = list(dict.fromkeys(shown))
    states = range(cache.n_states - 1, -1, -1)
    first = cache.missing(states, shown)
    if first:
        return first[:size]
    centre = sum(shown) / len(shown) if shown else 0.0
    rest = sorted((b for b in range(cache.n_blocks) if b not in shown), key=lambda b: (abs(b - centre), b))
    piece: list[tuple[int, int]] = []
    for block in rest:
        piece += cache.missing(states, [block])[:size - len(piece)]
        if len(piece) >= size:
            break
    return piece


def lens_logits(model, trace: Trace, index: int, rows: Optional[slice] = None) -> np.ndarray:
    """[n_seq, n_vocab]: the output head applied to hidden_states[index] (0 = the embedding
    output, n_layer = the last layer), through the final norm as the last layer goes — what
    the model would predict if it stopped there. At index n_layer this is trace.logits.
    `rows` limits it to some positions (a long text's lens is computed a block at a time)."""
    if not model.config.lm_head:
        raise ModelError(f"{model.name}: the logit lens needs an output head")
    if not 0 <= index <= model.config.n_layer:
        raise ModelError(f"hidden state {index} is out of range (0..{model.config.n_layer})")
    hidden = trace.hidden_states[index]       # the last one already has the final norm
    if rows is not None:
        hidden = hidden[rows]
    if model.config.final_norm and index < model.config.n_layer:
        hidden = norm(model.params, model.config, "ln_f", hidden)[1]
    return lm_head(model.params, model.config, hidden, _ignore)


def _ignore(name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
    pass


def lens_block(model, trace: Trace, state: int, rows: slice, top: int,
               final_ids: Optional[np.ndarray]) -> LensBlock:
    """One hidden state's lens at some positions: the head's logits, softmax, the `top` best;
    and the probability of `final_ids` ([k], the final state's best; None: this is the final
    state, whose best it is)."""
    logits = lens_logits(model, trace, state, rows)
    p = ops.softmax(logits, out=logits)
    ids, probabilities = best(p, top)
    chosen = ids[:, 0] if final_ids is None else final_ids
    block = LensBlock(ids, probabilities, p[np.arange(p.shape[0]), chosen])
    for array in block:
        array.flags.writeable = False
    return block


def best(p: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    # [k, n_vocab] probabilities -> (ids [k, top], probabilities [k, top]), best first
    chosen_ids = np.argpartition(p, -top, axis=-1)[:, -top:] if top < p.shape[1] \
        else np.broadcast_to(np.arange(p.shape[1]), p.shape)
    chosen = np.take_along_axis(p, chosen_ids, axis=-1)
    order = np.argsort(-chosen, axis=-1, kind="stable")
    return np.take_along_axis(chosen_ids, order, axis=-1), np.take_along_axis(chosen, order, axis=-1)


def trace_lens(model, trace: Trace, top: int = 5) -> TraceLens:
    """The trace's lens cache, made on first use (kept with the trace, freed with it); a cache
    of fewer than `top` tokens is replaced by one of `top`."""
    with _lock:
        known = _traces.get(trace)
        if known is None or known.top < min(top, model.config.n_vocab) or known._model() is not model:
            known = _traces[trace] = TraceLens(model, trace, top)
        return known


def cached_trace_lens(trace: Trace) -> Optional[TraceLens]:
    with _lock:
        return _traces.get(trace)
