"""What the weighted sum passes on and what it loses (stage 8, the fourth question).

A head's output for one query is o = Σⱼ wⱼ vⱼ: d_head numbers made from the n weights of the
keys it reads. The next layer receives o (through W_O, added to the residual stream), never w.
The map w -> (Σⱼ wⱼ vⱼ, Σⱼ wⱼ) is linear, given by the (d_head + 1) × n matrix A = [Vᵀ; 1ᵀ]:

- when n > rank(A) (at the latest n > d_head + 1) it has a null space, and other valid weightings
  w′ (≥ 0, the same total, w′ ≠ w) give exactly the same o: `same_output_weighting` constructs one
  by walking from w along null-space directions that raise one other source's weight;
- when n ≤ d_head + 1 and the vⱼ are affinely independent (rank(A) = n) the weights can be read
  back from o by least squares: `recover_weights`.

Numpy only; float64 inside, the outputs compared as the model computes them (float32)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

SHRINK = 0.99          # stop short of the polytope's face: every weight stays > 0 (a softmax of log w′)
MAX_TRIES = 8          # other sources tried as the new top, most-weighted first


def max_keys(d_head: int) -> int:
    """The most keys the construction moves (the rest keep their weights): a linear program's
    cost grows with them; 2 (d_head + 1) leaves a null space of d_head + 1 dimensions."""
    return max(2 * (d_head + 1), 64)


def constraint_matrix(v: np.ndarray) -> np.ndarray:
    # [n, d_head] -> [d_head + 1, n]: the linear map w -> (Σ wⱼ vⱼ, Σ wⱼ)
    v64 = np.asarray(v, dtype=np.float64)
    return np.vstack([v64.T, np.ones(len(v64))])


def _rank(a: np.ndarray) -> int:
    s = np.linalg.svd(a, compute_uv=False)
    return int(np.sum(s > s[0] * max(a.shape) * np.finfo(np.float64).eps * 16)) if s.size and s[0] > 0 else 0


@dataclass(frozen=True)
class OtherWeighting:
    weights: np.ndarray        # w′ over all keys [n_k] (0 where w is 0), float64
    target: int                # the source w′ was built to raise
    top: int                   # argmax of w′ (the real w's argmax is `original_top`)
    original_top: int
    output: np.ndarray         # Σ w′ⱼ vⱼ computed as the model does (float32) [d_head]
    original_output: np.ndarray  # Σ wⱼ vⱼ the same way [d_head]
    relative_difference: float  # ‖output − original_output‖ / ‖original_output‖
    change: float              # ½ Σ |w′ⱼ − wⱼ|: the total variation between the two weightings
    total_difference: float    # |Σ w′ − Σ w|

    @property
    def top_changed(self) -> bool:
        return self.top != self.original_top


def _pivot(table: np.ndarray, row: int, col: int) -> None:
    table[row] /= table[row, col]
    column = table[:, col].copy()
    column[row] = 0.0
    table -= np.outer(column, table[row])


def _run(table: np.ndarray, basis: list, columns: int, tol: float) -> None:
    """Simplex pivots on `table` (the last row the reduced costs, the last column the values)
    until no column among the first `columns` improves. Dantzig's rule (the most negative
    reduced cost); after a run of degenerate pivots, Bland's (the first improving column, ties
    by the lowest basic index), which cannot cycle."""
    m = len(basis)
    degenerate = 0
    for _ in range(50 * (m + columns)):
        costs = table[m, :columns]
        improving = np.flatnonzero(costs < -tol)
        if improving.size == 0:
            return
        bland = degenerate > 2 * m
        col = int(improving[0]) if bland else int(improving[np.argmin(costs[improving])])
        rising = np.flatnonzero(table[:m, col] > tol)
        if rising.size == 0:
            return                                 # unbounded: not on a simplex (Σ w fixed)
        ratios = table[rising, -1] / table[rising, col]
        best = ratios.min()
        ties = rising[ratios <= best + tol]
        row = int(min(ties, key=lambda r: basis[r]))
        degenerate = degenerate + 1 if best <= tol else 0
        _pivot(table, row, col)
        basis[row] = col


def linear_program(a: np.ndarray, b: np.ndarray, c: np.ndarray, tol: float = 1e-11) -> Optional[np.ndarray]:
    """max c·x subject to a x = b, x ≥ 0 (a [m, n], float64): the two-phase tableau simplex
    (Dantzig's rule, Bland's against cycling). None when infeasible. Small dense problems only
    (m ≲ 200)."""
    start = feasible_start(a, b, tol)
    return None if start is None else optimise(start, c, tol)


def feasible_start(a: np.ndarray, b: np.ndarray, tol: float = 1e-11) -> Optional[tuple]:
    """Phase 1: a basic feasible solution of a x = b, x ≥ 0, as (tableau, basis) for optimise
    (shared by every objective over the same constraints); None when there is none."""
    m, n = a.shape
    flip = np.where(b < 0, -1.0, 1.0)
    table = np.zeros((m + 1, n + m + 1))
    table[:m, :n] = a * flip[:, None]
    table[:m, n:n + m] = np.eye(m)
    table[:m, -1] = b * flip
    basis = list(range(n, n + m))
    table[m, :n] = -table[:m, :n].sum(axis=0)      # minimise the artificials' sum
    table[m, -1] = -table[:m, -1].sum()
    _run(table, basis, n, tol)
    if table[m, -1] < -tol * max(1.0, float(np.abs(b).sum())) * 1e3:
        return None
    keep = []
    for row, var in enumerate(basis):              # drive the artificials out of the basis
        if var >= n:
            candidates = np.flatnonzero(np.abs(table[row, :n]) > tol)
            if candidates.size == 0:
                continue                           # a redundant equation: drop its row
            _pivot(table, row, int(candidates[0]))
            basis[row] = int(candidates[0])
        keep.append(row)
    table = np.vstack([table[keep][:, list(range(n)) + [-1]], np.zeros(n + 1)])
    return table, [basis[r] for r in keep]


def optimise(start: tuple, c: np.ndarray, tol: float = 1e-11) -> np.ndarray:
    """Phase 2 from feasible_start's (tableau, basis), left as it was: max c·x."""
    table, basis = start[0].copy(), list(start[1])
    n = table.shape[1] - 1
    table[-1, :n] = -c                             # reduced costs of max c·x
    table[-1, -1] = 0.0
    for row, var in enumerate(basis):
        table[-1] += c[var] * table[row]
    _run(table, basis, n, tol)
    x = np.zeros(n)
    x[basis] = table[:len(basis), -1]
    return np.maximum(x, 0.0)


def same_output_weighting(weights_row: np.ndarray, v: np.ndarray,
                          token_ids: Optional[Sequence[int]] = None) -> Optional[OtherWeighting]:
    """One query's weights [n_k] (0 or NaN where the mask blocks a key) and the head's values
    [n_k, d_head] -> another weighting with the same output, or None when the keys read are
    too few (rank(A) = n: w is the only one). For each other source t in turn (by weight, those
    of another token id than the top's first when `token_ids` is given; at most MAX_TRIES) a
    linear program finds the valid weighting with the same output that most raises w_t over
    the top's weight; the first in which t is the largest weight is kept, else the try that
    moved w farthest.
    The result is w moved SHRINK of the way there, so every weight stays positive."""
    w_all = np.nan_to_num(np.asarray(weights_row, dtype=np.float64), nan=0.0)
    support = np.flatnonzero(w_all > 0)
    d_head = np.asarray(v).shape[1]
    if len(support) > max_keys(d_head):            # a long text: move only the most-weighted keys
        support = np.sort(support[np.argsort(-w_all[support], kind="stable")[:max_keys(d_head)]])
    a = constraint_matrix(np.asarray(v)[support])
    n = len(support)
    if n < 2 or _rank(a) >= n:
        return None
    w = w_all[support]
    b = a @ w                                      # the other keys keep their weights
    top = int(np.argmax(w))
    order = [int(j) for j in np.argsort(-w, kind="stable") if j != top]
    if token_ids is not None:
        ids = np.asarray(token_ids)[support]
        order = [j for j in order if ids[j] != ids[top]] + [j for j in order if ids[j] == ids[top]]
    start = feasible_start(a, b)
    if start is None:
        return None
    best = None          # (how far it moved, target, w′): the first new top, else the farthest
    for target in order[:MAX_TRIES]:
        c = np.zeros(n)
        c[target], c[top] = 1.0, -1.0
        end = optimise(start, c)
        if not _same(a, end, b):
            continue
        moved = w + SHRINK * (end - w)
        change = float(np.abs(moved - w).sum())
        if int(np.argmax(moved)) == target:
            best = (np.inf, target, moved)
            break
        if best is None or change > best[0]:
            best = (change, target, moved)
    if best is None:
        return None
    _, target, moved = best
    full = w_all.copy()
    full[support] = moved
    return _describe(full, w_all, np.asarray(v), int(support[target]))


def _same(a: np.ndarray, x: np.ndarray, b: np.ndarray) -> bool:
    return float(np.linalg.norm(a @ x - b)) <= 1e-9 * max(float(np.linalg.norm(b)), 1.0)


def _describe(w_new: np.ndarray, w_old: np.ndarray, v: np.ndarray, target: int) -> OtherWeighting:
    v32 = np.asarray(v, dtype=np.float32)
    out_new = w_new.astype(np.float32) @ v32
    out_old = w_old.astype(np.float32) @ v32
    norm = max(float(np.linalg.norm(out_old.astype(np.float64))), 1e-30)
    return OtherWeighting(
        weights=w_new, target=target, top=int(np.argmax(w_new)), original_top=int(np.argmax(w_old)),
        output=out_new, original_output=out_old,
        relative_difference=float(np.linalg.norm((out_new - out_old).astype(np.float64)) / norm),
        change=float(0.5 * np.abs(w_new - w_old).sum()),
        total_difference=float(abs(w_new.sum() - w_old.sum())))


@dataclass(frozen=True)
class Recovery:
    n_keys: int                # keys read (weight > 0)
    rank: int                  # rank of A = [Vᵀ; 1ᵀ] over them
    recoverable: bool          # rank == n_keys: w is the only weighting giving this output
    recovered: np.ndarray      # least-squares w from the output [n_k] (0 where w is 0)
    max_error: float           # max |recovered − w|
    limit: int                 # d_head + 1: from limit + 1 keys on, recovery is impossible


def recover_weights(output: np.ndarray, weights_row: np.ndarray, v: np.ndarray) -> Recovery:
    """Read a query's weights back from its head output [d_head] alone (and that they sum to
    their total), given the values [n_k, d_head] of the keys it read (weight > 0): least
    squares on A w = (output, total). Exact only when rank(A) = n; beyond, the minimum-norm
    solution is one of many and generally not w."""
    w_all = np.nan_to_num(np.asarray(weights_row, dtype=np.float64), nan=0.0)
    support = np.flatnonzero(w_all > 0)
    a = constraint_matrix(np.asarray(v)[support])
    rhs = np.concatenate([np.asarray(output, dtype=np.float64), [w_all.sum()]])
    solution, *_ = np.linalg.lstsq(a, rhs, rcond=None)
    recovered = np.zeros_like(w_all)
    recovered[support] = solution
    rank = _rank(a)
    return Recovery(n_keys=len(support), rank=rank, recoverable=rank == len(support),
                    recovered=recovered, max_error=float(np.max(np.abs(recovered - w_all))),
                    limit=a.shape[0])


@dataclass(frozen=True)
class Survival:
    tops: np.ndarray           # [n_head]: the key each head weights most for the query
    n_distinct_tops: int
    mean_head_distance: float  # mean over head pairs of ½ Σ |w_h − w_g| (0: same, 1: disjoint)
    residual_cosine: float     # cos(x_i, x_i + attn_out_i): the token's own vector carried on
    attention_ratio: float     # ‖attn_out_i‖ / ‖x_i‖


def survival(every_head_weights: np.ndarray, x: np.ndarray, attn_out: np.ndarray) -> Survival:
    """[n_head, n_k] the query's weights in every head; x [d_model] the residual stream entering
    the layer at the query, attn_out [d_model] what attention adds to it."""
    rows = np.nan_to_num(np.asarray(every_head_weights, dtype=np.float64), nan=0.0)
    tops = np.argmax(rows, axis=1)
    n = len(rows)
    pairs = [0.5 * np.abs(rows[h] - rows[g]).sum() for h in range(n) for g in range(h + 1, n)]
    x64, add = np.asarray(x, dtype=np.float64), np.asarray(attn_out, dtype=np.float64)
    total = x64 + add
    denominator = max(float(np.linalg.norm(x64) * np.linalg.norm(total)), 1e-30)
    return Survival(tops=tops, n_distinct_tops=len(set(tops.tolist())),
                    mean_head_distance=float(np.mean(pairs)) if pairs else 0.0,
                    residual_cosine=float(x64 @ total / denominator),
                    attention_ratio=float(np.linalg.norm(add) / max(float(np.linalg.norm(x64)), 1e-30)))


@dataclass(frozen=True)
class WeightedSumAnswer:
    """Stage 8's answer for one query, layer and head of a trace: what is passed on, another
    weighting with the same output (or why none), the weights read back where they can be,
    and what survives anyway."""
    position: int
    n_keys: int                # keys the query reads (weight > 0)
    d_head: int                # numbers passed on per head
    d_model: int               # the residual stream's width, which W_O writes them into
    null_dimension: int        # n_keys − rank(A): 0 when w is the only weighting
    other: Optional[OtherWeighting]
    recovery: Recovery         # reading the query's own weights back from its output
    short_position: Optional[int]   # a query of this trace reading ≤ d_head + 1 keys, if any
    short_recovery: Optional[Recovery]
    survival: Survival


def weighted_sum_answer(trace, layer: int, head: int, position: int) -> WeightedSumAnswer:
    """From the trace of one pass: the query at `position`, layer and head."""
    config = trace.config
    weights = trace.head_array("attn_weights", layer, head)
    v = trace.head_array("v", layer, head)
    outputs = trace.head_array("head_outputs", layer, head)
    row = weights[position]
    support = np.flatnonzero(np.nan_to_num(row, nan=0.0) > 0)
    rank = _rank(constraint_matrix(v[support]))
    recovery = recover_weights(outputs[position], row, v)
    short_position, short = None, None
    if not recovery.recoverable:                     # the last query reading few enough keys
        reads = np.count_nonzero(np.nan_to_num(weights, nan=0.0) > 0, axis=1)
        fits = np.flatnonzero(reads <= config.d_head + 1)
        if fits.size:
            short_position = int(fits[-1])
            short = recover_weights(outputs[short_position], weights[short_position], v)
    every_head = trace.head_rows("attn_weights", layer, position)
    kept = survival(every_head, trace.hidden_states[layer][position], trace.layer("attn_out", layer)[position])
    return WeightedSumAnswer(position=position, n_keys=len(support), d_head=config.d_head,
                             d_model=config.d_model, null_dimension=len(support) - rank,
                             other=same_output_weighting(row, v, trace.input_ids), recovery=recovery,
                             short_position=short_position, short_recovery=short, survival=kept)


def quick_enough(n_keys: int, d_head: int) -> bool:
    """Whether the answer costs little enough to compute where it is asked for (a view on the
    GUI thread): no linear program (n ≤ d_head + 1), or a small one (n (d_head + 1) ≤ 400: at
    most ~20 ms, eight tries, measured at load 12 on 2 cores; 36 keys × 9 rows)."""
    return n_keys <= d_head + 1 or n_keys * (d_head + 1) <= 400
