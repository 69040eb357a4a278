"""A trace's detailed layers, kept within a byte budget and computed on demand (core/trace/trace.py)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Optional

from .layer_detail import LayerDetail, as_layer_detail, detail_nbytes


class LayerCache:
    """Detailed layers by index, least recently used first, within a byte budget. A layer
    larger than the budget alone is kept per head (LayerDetail.headwise: without its
    n_head·n² weights, each head's derived when read, the last head read kept); only when even
    that exceeds the budget is the layer just computed kept over it. Thread-safe: the app
    prepares layers in a worker while the GUI thread reads them. A layer is computed outside
    the lock (reading a ready layer, its size or what is cached never waits for another layer's
    computation, 0.1 s at 512 tokens), and by one thread at a time: a second asker of the
    same layer waits for the first one's result."""

    def __init__(self, compute: Callable[[int], LayerDetail], budget: int) -> None:
        self._compute = compute
        self.budget = int(budget)
        self._layers: OrderedDict[int, LayerDetail] = OrderedDict()
        self._lock = threading.RLock()
        self._computing: dict[int, threading.Event] = {}   # layer -> set when its computation ends
        self.computed = 0                 # how many layer details were computed (evictions show)

    def put(self, layer: int, detail: LayerDetail) -> None:
        """A layer's detail recorded by the pass itself (identical to computing it)."""
        with self._lock:
            self._layers[layer] = self._fitted(detail)
            self._evict(keep=layer)

    def _fitted(self, detail: LayerDetail) -> LayerDetail:
        # per head when whole it alone exceeds the budget; one head's derived arrays kept
        # within what the budget leaves
        detail = as_layer_detail(detail)
        if detail.nbytes() > self.budget:
            detail = detail.headwise()
        detail.memo_limit = max(self.budget - detail.nbytes(), 0)
        return detail

    def trim(self, layer: int) -> None:
        """After reading a head of `layer` (its derived arrays kept): the others within the budget."""
        with self._lock:
            if layer in self._layers:
                self._evict(keep=layer)

    def get(self, layer: int) -> LayerDetail:
        while True:
            with self._lock:
                detail = self._layers.get(layer)
                if detail is not None:
                    self._layers.move_to_end(layer)
                    return detail
                running = self._computing.get(layer)
                if running is None:
                    done = self._computing[layer] = threading.Event()
                    break
            running.wait()      # then read it (or, had it failed or been evicted, compute it)
        try:
            detail = self._compute(layer)
            with self._lock:
                self.computed += 1
                detail = self._layers[layer] = self._fitted(detail)
                self._evict(keep=layer)
            return detail
        finally:
            with self._lock:
                del self._computing[layer]
            done.set()

    def read(self, layer: int) -> LayerDetail:
        """A layer's detail without keeping it: the held one, else computed and let go (a read
        of every layer, as a model diff makes, leaves the cache and the layer on screen as
        they were)."""
        with self._lock:
            detail = self._layers.get(layer)
        if detail is not None:
            return detail
        detail = as_layer_detail(self._compute(layer))
        with self._lock:
            self.computed += 1
        return detail

    def set_budget(self, budget: int) -> None:
        """A new budget (the user's setting), applied at once: least recently used out first,
        the most recent layer kept."""
        with self._lock:
            self.budget = int(budget)
            if self._layers:
                newest = next(reversed(self._layers))
                self._evict(keep=newest)
                for layer, detail in self._layers.items():
                    self._layers[layer] = self._fitted(detail)

    def room_beside(self, layer: int) -> bool:
        """Whether `layer` is held and one more layer (as large as the largest held) fits the
        budget beside it: prefetching a layer that does not would push out the layer on
        screen, which its views would then compute again (on the GUI thread, seconds for a
        1B model's layer at 2,048 tokens)."""
        with self._lock:
            sizes = {i: detail_nbytes(d) for i, d in self._layers.items()}
        return layer in sizes and sizes[layer] + max(sizes.values()) <= self.budget

    def oversized(self) -> Optional[int]:
        """The layer kept although it alone exceeds the budget (even per head), else None."""
        with self._lock:
            if len(self._layers) == 1 and self.nbytes() > self.budget:
                return next(iter(self._layers))
            return None

    def has(self, layer: int) -> bool:
        with self._lock:
            return layer in self._layers

    def held(self) -> list[tuple[int, LayerDetail]]:
        """(layer, detail) of every kept layer, least recently used first; computes nothing."""
        with self._lock:
            return list(self._layers.items())

    def per_head(self) -> list[int]:
        """The layers kept per head (their weights computed a head at a time)."""
        with self._lock:
            return [layer for layer, detail in self._layers.items() if detail.per_head]

    def _evict(self, keep: int) -> None:
        while self.nbytes() > self.budget and len(self._layers) > 1:
            oldest = next(iter(self._layers))
            if oldest == keep:
                break
            del self._layers[oldest]

    def nbytes(self) -> int:
        with self._lock:
            return sum(detail_nbytes(d) for d in self._layers.values())

    def layers(self) -> list[int]:
        with self._lock:
            return list(self._layers)

    def clear(self) -> None:
        with self._lock:
            self._layers.clear()
