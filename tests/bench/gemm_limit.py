"""The matrix products of one forward pass and how fast a library multiplies them alone: the
floor under the pass (every product of the pass is needed to show its arrays, so no
implementation on the same library can beat its GEMM time) and the yardstick for "what
fraction of the physical limit does the pass reach".

Products are (name, batch, m, k, n): batch x [m, k] @ [k, n]. Linear layers are timed in both
orientations (x @ W and W.T @ x.T) and the faster counts, as ops.linear picks one; every
layer gets its own weights, so they stream from memory as in the pass. Used by bench_core.py
with numpy and by hf_forward.py with torch (imports neither itself)."""
from __future__ import annotations

import time
from typing import Callable

Product = tuple[str, int, int, int, int]


def pass_products(d_model: int, n_head: int, d_head: int, n_kv_head: int, d_ff: int,
                  gated: bool, n_seq: int) -> list[Product]:
    """One layer's products (the pass repeats them n_layer times); no vocabulary product
    (the first view does not compute logits)."""
    d_q, d_kv = n_head * d_head, n_kv_head * d_head
    products = [("q", 1, n_seq, d_model, d_q), ("k", 1, n_seq, d_model, d_kv),
                ("v", 1, n_seq, d_model, d_kv), ("o", 1, n_seq, d_q, d_model)]
    products += [(name, 1, n_seq, d_model, d_ff) for name in (("gate", "up") if gated else ("fc",))]
    products += [("proj", 1, n_seq, d_ff, d_model),
                 ("scores", n_head, n_seq, d_head, n_seq), ("weights_v", n_head, n_seq, n_seq, d_head)]
    return products


def flops(products: list[Product], n_layer: int) -> int:
    return n_layer * sum(2 * batch * m * k * n for _, batch, m, k, n in products)


def _best(fn: Callable[[], object], repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def gemm_seconds(products: list[Product], n_layer: int, randn: Callable, matmul: Callable,
                 transpose: Callable, repeats: int = 7) -> dict[str, float]:
    """name -> seconds of that product over all layers (best of `repeats`; the machine may be
    shared). randn(*shape) makes float32 arrays, transpose(a) swaps the last two axes."""
    seconds = {}
    for name, batch, m, k, n in products:
        if batch == 1:
            x = randn(m, k)
            weights = [randn(k, n) for _ in range(n_layer)]
            left = _best(lambda: [matmul(x, w) for w in weights], repeats)
            right = _best(lambda: [matmul(transpose(w), transpose(x)) for w in weights], repeats)
            seconds[name] = min(left, right)
        else:
            a, b = randn(batch, m, k), randn(batch, k, n)
            seconds[name] = n_layer * _best(lambda: matmul(a, b), repeats)
    return seconds


def peak_gflops(randn: Callable, matmul: Callable, size: int = 2048, repeats: int = 5) -> float:
    """A large square product: the library's best rate on this machine."""
    a, b = randn(size, size), randn(size, size)
    return 2 * size ** 3 / _best(lambda: matmul(a, b), repeats) / 1e9
