"""What the Router stage and the feed-forward of a mixture-of-experts layer show, computed from
the trace (the views format it): the experts' load per layer over the text and a token's path
through every layer's experts, read from the router logits the pass keeps for every layer (the
top-k taken again by core/model/moe.py's functions: the pass's own choices, bit for bit, where no
intervention edits the router), and one token's readout at one layer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..model import moe


def layer_choices(trace, layer: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(expert_ids [n_seq, k], gates [n_seq, k]) of an MoE layer as the pass chose them (kept
    for every layer: no layer detail computed); None for a dense layer."""
    if not trace.config.is_moe_layer(layer):
        return None
    return trace.layer("expert_ids", layer), trace.layer("expert_gates", layer)


@dataclass(frozen=True)
class ExpertLoad:
    counts: np.ndarray        # [n_layer, n_expert] tokens routed to each expert (0 in dense layers)
    moe_layers: np.ndarray    # [n_layer] bool: the layer routes to experts
    path: np.ndarray          # [n_layer, k] the selected token's experts (-1 in dense layers)
    path_gates: np.ndarray    # [n_layer, k] their gates (NaN in dense layers)


def expert_load(trace, token: int, rows: Optional[np.ndarray] = None) -> ExpertLoad:
    """Every layer's expert load over the text's tokens (those of `rows`, or all), and token
    `token`'s path through the experts."""
    config = trace.config
    k = config.n_expert_used
    counts = np.zeros((config.n_layer, config.n_expert), dtype=np.int64)
    moe_layers = np.zeros(config.n_layer, dtype=bool)
    path = np.full((config.n_layer, k), -1, dtype=np.int64)
    path_gates = np.full((config.n_layer, k), np.nan, dtype=np.float32)
    for layer in range(config.n_layer):
        choices = layer_choices(trace, layer)
        if choices is None:
            continue
        ids, gates = choices
        moe_layers[layer] = True
        counts[layer] = moe.load(ids, config.n_expert, rows)
        path[layer], path_gates[layer] = ids[token], gates[token]
    return ExpertLoad(counts, moe_layers, path, path_gates)


def gate_matrix(expert_ids: np.ndarray, gates: np.ndarray, n_expert: int) -> np.ndarray:
    """[n_seq, k] ids and gates -> [n_seq, n_expert]: each token's gate on each expert (0 where
    the expert was not chosen): the mixture's weights as a matrix."""
    out = np.zeros((len(expert_ids), n_expert), dtype=np.float32)
    np.put_along_axis(out, expert_ids, gates, axis=-1)
    return out


@dataclass(frozen=True)
class RouterReadout:
    experts: tuple[int, ...]          # the token's chosen experts, largest gate first
    gates: tuple[float, ...]          # their gates
    probabilities: tuple[float, ...]  # their softmax probabilities before any normalisation
    chosen_mass: float                # Σ of those probabilities (what the top-k keeps of the softmax)
    normalised: bool                  # gates = probabilities / chosen_mass
    shared_gate: Optional[float]      # sigmoid(x · w) of the shared expert (Qwen2-MoE; DeepSeek-V2's
                                      # shared experts have no gate: None)
    busiest: int                      # the layer's most chosen expert over the text
    busiest_count: int
    unused: int                       # experts no token chose in this layer


def router_readout(trace, layer: int, token: int) -> RouterReadout:
    config = trace.config
    detail = trace.detail(layer)
    ids, gates, probs = detail["expert_ids"][token], detail["expert_gates"][token], detail["router_probs"][token]
    chosen = probs[ids]
    counts = moe.load(detail["expert_ids"], config.n_expert)
    shared = (float(detail["shared_expert_gate"][token, 0])
              if config.d_shared_expert and config.shared_expert_gate else None)
    return RouterReadout(tuple(int(e) for e in ids), tuple(float(g) for g in gates),
                         tuple(float(p) for p in chosen), float(chosen.astype(np.float64).sum()),
                         config.norm_topk, shared, int(counts.argmax()), int(counts.max()),
                         int((counts == 0).sum()))
