"""The numbers a walk's captions quote (core/analysis/walks.py): each readout takes the step's state on
a model and returns named numbers (and a few named words, such as the token a head reads most),
computed here from the trace, the parameters or the comparison of that state. Every readout is
one small function over tested core functions (compare, measures, provenance, interventions,
the training network); none holds a number of its own."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Optional

import numpy as np

from ..model import measures
from .compare import piece_text
from ..model.errors import ModelError
from ..model.interventions import AblateHead
from .labels import POSITION_LABELS
from ..trace.trace import Trace
from .walk_context import READOUTS, WALK_TRAINING_STEPS, Context, Readout, _f, _register, readout  # noqa: F401


# -- always there -------------------------------------------------------------------------
def agreement(difference: float, when_zero: str, otherwise: str) -> str:
    """How a caption says a largest difference: 0 as what it means ('exactly'), not 'to within 0'."""
    return when_zero if difference == 0 else f"{otherwise} {difference:g}"


@_register
def read_model(c: Context) -> dict:
    config = c.config
    kind = ("decoder" if config.causal else "encoder")
    return dict(model_name=c.model.name, family=config.family, kind=kind, n_layer=config.n_layer,
                n_head=config.n_head, d_model=config.d_model, d_head=config.d_head,
                n_vocab=config.n_vocab, position_scheme=POSITION_LABELS.get(config.position, config.position),
                layer=c.state.layer, head=c.state.head, word=c.state.word)


@_register
def read_selection(c: Context) -> dict:
    i = c.position
    return dict(token=c.label(i), position=i, token_id=int(c.trace.input_ids[i]), n_seq=c.trace.n_seq)


# -- the lookup table -----------------------------------------------------------------------
@_register
def read_lookup(c: Context) -> dict:
    """one-hot(id) × E computed as a product (block by block over E's rows) against the
    trace's looked-up row: row selection, exactly."""
    i, token_id = c.position, int(c.trace.input_ids[c.position])
    params = c.model.params
    product = np.zeros(params.shape("wte")[1], np.float32)
    for start, block in params.row_blocks("wte"):
        one_hot = np.zeros(len(block), np.float32)
        if start <= token_id < start + len(block):
            one_hot[token_id - start] = 1.0
        product += one_hot @ block
    row = c.trace.arrays["token_embeddings"][i]
    onehot = _f(np.max(np.abs(product - row)))
    return dict(onehot_difference=onehot, onehot_agreement=agreement(onehot, "exactly", "to within"),
                row_norm=_f(np.linalg.norm(row)),
                table_rows=params.shape("wte")[0], table_cols=params.shape("wte")[1])


@_register
def read_repeated(c: Context) -> dict:
    """A token id that occurs twice in the text: its two lookup rows, and what enters layer 0
    at its two positions."""
    trace = c.trace
    ids = trace.input_ids[~trace.special_tokens_mask]
    where = np.flatnonzero(~trace.special_tokens_mask)
    values, counts = np.unique(ids, return_counts=True)
    if not np.any(counts > 1):
        raise ModelError(f"no token occurs twice in '{trace.text}'")
    twice = values[counts > 1][0]
    a, b = where[ids == twice][:2]
    rows = trace.arrays["token_embeddings"]
    entry = trace.hidden_states[0]
    # focus: the token the caption speaks of, selected in the window (ui/walks/walk_panel.py)
    return dict(repeated=c.label(a), first_at=int(a), second_at=int(b), focus=int(a),
                repeated_row_difference=_f(np.max(np.abs(rows[a] - rows[b]))),
                repeated_entry_difference=_f(np.max(np.abs(entry[a] - entry[b]))),
                repeated_entry_cosine=_f(measures.cosine_rows(entry[a:a + 1], entry[b:b + 1])[0]),
                entry_reason=_entry_reason(c.config))


# -- layer by layer ---------------------------------------------------------------------------
@_register
def read_drift(c: Context) -> dict:
    """The selected token's hidden state, layer by layer: its cosine to its own state 0."""
    states = c.trace.hidden_states[:, c.position]
    cosines = measures.cosine_rows(states, np.broadcast_to(states[0], states.shape))
    return dict(drift_first=_f(cosines[1]), drift_last=_f(cosines[-1]),
                drift_layers=", ".join(f"{v:.2f}" for v in cosines))


@_register
def read_compare(c: Context) -> dict:
    result = c.comparison
    occ = result.occurrences
    pair_cos = result.pair_cosines                               # [n_pairs, n_states]
    same = [p for p, (i, j) in enumerate(result.pairs) if result.same_id(i, j)]
    lookup = max((_f(np.max(np.abs(result.lookup_difference(*result.pairs[p])))) for p in same),
                 default=float("nan"))
    mean = pair_cos.mean(axis=0)
    drop_at, drop = measures.largest_drop(mean)
    entry = result.hidden[:, 0]                                  # what enters layer 0
    entry_diff = max(_f(np.max(np.abs(entry[i] - entry[j]))) for i, j in result.pairs)
    return dict(n_sentences=len(result.sentences), n_found=len(occ), compare_token_id=occ[0].token_id,
                same_id_pairs=len(same), n_pairs=len(result.pairs), lookup_difference=lookup,
                lookup_agreement=agreement(lookup, "are the same numbers, bit for bit",
                                           "differ by at most"),
                entry_difference=entry_diff, cos_entry=_f(pair_cos[:, 0].min()),
                cos_last=_f(pair_cos[:, -1].min()), cos_last_mean=_f(mean[-1]),
                drop_state=result.state_names[drop_at], drop=_f(drop),
                entry_reason=_entry_reason(c.config))


def _entry_reason(config) -> str:
    if config.position in ("learned", "sinusoidal"):
        extra = " and a LayerNorm" if config.embed_norm else ""
        return f"each position adds its own vector{extra} before layer 0"
    if config.position == "rotary":
        return "nothing is added before layer 0: this model turns q and k by position instead (rotary)"
    return "this model adds nothing to the row before layer 0"


# -- positions ---------------------------------------------------------------------------------
@_register
def read_position_sizes(c: Context) -> dict:
    """e (the looked-up rows) and p (the position rows) per dimension, over the text's tokens:
    RMS of the first 8 dimensions and of the rest, and the cosine of e with e + p."""
    arrays = c.trace.arrays
    e = arrays.get("token_embeddings_scaled", arrays["token_embeddings"]).astype(np.float64)
    p = arrays["position_embeddings"].astype(np.float64)
    first = min(8, e.shape[1] // 2)
    rms_e, rms_p = measures.rms_per_dim(e), measures.rms_per_dim(p)
    cos = measures.cosine_rows(e, e + p)
    return dict(rms_e_first=_f(rms_e[:first].mean()), rms_p_first=_f(rms_p[:first].mean()),
                rms_e_rest=_f(rms_e[first:].mean()), rms_p_rest=_f(rms_p[first:].mean()),
                n_first=first, cos_e_ep_mean=_f(cos.mean()), cos_e_ep_min=_f(cos.min()))


@_register
def read_positions_lab(c: Context) -> dict:
    """The positions laboratory's shipped results (extras["positions_results"]: its rows):
    held-out accuracy per scheme over its seeds."""
    rows = c.extras.get("positions_results")
    if not rows:
        raise ModelError("the positions laboratory's results are not available")
    return positions_lab_numbers(rows)


def positions_lab_numbers(rows) -> dict:
    """The laboratory's results rows -> mean (range over seeds) per scheme, as quoted text, and
    how the concatenated variant (the same width split between e and p) stands to the sum."""
    from ..training.positions_table import seeds_in, standing, summarize

    summary = summarize(rows, ("heldout_accuracy", "pronoun"))
    ranks = standing(summary, "heldout_accuracy")
    best = next((v for v, r in ranks.items() if r == "best"), "—")
    def spread(variant: str, measure: str) -> str:
        s = summary.get(variant, {}).get(measure)
        return "—" if s is None else f"{100 * s.mean:.1f} % ({100 * s.low:.1f}–{100 * s.high:.1f})"
    added, concat = (summary.get(v, {}).get("heldout_accuracy") for v in ("sum_sinusoidal", "concat"))
    if added is None or concat is None:
        versus = "not measured"
    elif concat.low <= added.high and added.low <= concat.high:
        versus = "a tie: their ranges over the seeds overlap"
    else:
        versus = ("concatenation ahead" if concat.mean > added.mean else "the sum ahead") + \
            ", beyond the range over the seeds"
    return dict(n_schemes=len(summary), n_seeds=len(seeds_in(rows)),
                sum_accuracy=spread("sum_sinusoidal", "heldout_accuracy"),
                concat_accuracy=spread("concat", "heldout_accuracy"),
                rotary_accuracy=spread("rotary", "heldout_accuracy"),
                none_pronoun=spread("none", "pronoun"), sum_pronoun=spread("sum_sinusoidal", "pronoun"),
                best_accuracy=best.replace("_", " "), concat_versus_sum=versus,
                sum_standing={"best": "the best", "tie": "within the best scheme's seed range",
                              "apart": "outside the best scheme's seed range"}.get(ranks.get("sum_sinusoidal"), "not measured"))


@_register
def read_rotary(c: Context) -> dict:
    """Rotary's answer on a q/k pair of this text (the model's own, or its rows turned by a
    rotary of the same head width): the score depends on the distance only."""
    config = c.config if c.config.position == "rotary" else replace(c.config, position="rotary")
    q = c.trace.layer("attn_in", c.state.layer)[c.position, :config.d_head].astype(np.float32)
    k = c.trace.layer("attn_in", c.state.layer)[0, :config.d_head].astype(np.float32)
    shifts = np.arange(0, 40, 4)
    together, key_only = measures.rope_shift_scores(config, q, k, 5, 2, shifts)
    return dict(max_shift=int(shifts[-1]), rotary_own="this model's own" if c.config.position == "rotary" else "a rotary of the same head width",
                shift_spread=_f(np.ptp(together)), key_only_spread=_f(np.ptp(key_only)))


# -- attention ------------------------------------------------------------------------------------
def _weights(c: Context, trace: Optional[Trace] = None) -> np.ndarray:
    return (trace or c.trace).head_array("attn_weights", c.state.layer, c.state.head)[c.position]


@_register
def read_attention(c: Context) -> dict:
    w = _weights(c).astype(np.float64)
    order = np.argsort(-w, kind="stable")
    return dict(top_source=c.label(order[0]), top_weight=_f(w[order[0]]),
                second_source=c.label(order[1]) if len(w) > 1 else "—",
                second_weight=_f(w[order[1]]) if len(w) > 1 else 0.0,
                weight_sum=_f(w.sum()), n_sources=int(np.count_nonzero(w)))


@_register
def read_weighted_sum(c: Context) -> dict:
    """The head's output at the selected token against Σ_j w_j·v_j, term by term."""
    w = _weights(c).astype(np.float64)
    v = c.trace.head_array("v", c.state.layer, c.state.head).astype(np.float64)
    terms = w[:, None] * v                                       # [n_k, d_head]
    out = c.trace.head_array("head_outputs", c.state.layer, c.state.head)[c.position]
    sizes = np.linalg.norm(terms, axis=1)
    top = int(np.argmax(sizes))
    return dict(sum_difference=_f(np.max(np.abs(terms.sum(axis=0) - out))), n_terms=len(w),
                largest_term_source=c.label(top), largest_term_share=_f(sizes[top] / max(sizes.sum(), 1e-30)))


@_register
def read_provenance(c: Context) -> dict:
    from .provenance.explain import explain

    out = c.trace.head_array("head_outputs", c.state.layer, c.state.head)[c.position]
    dim = int(np.argmax(np.abs(out)))
    e = explain(c.model, c.trace, "head_outputs", (c.state.layer, c.state.head, c.position, dim))
    return dict(prov_dim=dim, prov_value=e.value, prov_traced=e.traced,
                prov_top_term=e.terms[0].label if e.terms else "—",
                prov_top_value=e.terms[0].value if e.terms else 0.0)


@_register
def read_heads(c: Context) -> dict:
    """Which token each head of the layer reads most from the selected token."""
    weights = c.trace.head_rows("attn_weights", c.state.layer, c.position)     # [n_head, n_k]
    tops = [c.label(int(np.argmax(row))) for row in weights]
    return dict(heads_tops=", ".join(f"head {h} → {t}" for h, t in enumerate(tops)),
                n_distinct_tops=len(set(np.argmax(weights, axis=1).tolist())))


@_register
def read_ablation(c: Context) -> dict:
    """The head ablated (zeros): how far the selected token's last hidden state moves, and the
    prediction there before and after where the model has an output head."""
    ablated = c.model.intervene(c.trace, [AblateHead(c.state.layer, c.state.head)])
    clean_h = c.trace.hidden_states[-1, c.position].astype(np.float64)
    ablated_h = ablated.hidden_states[-1, c.position].astype(np.float64)
    numbers = dict(ablation_change=_f(np.linalg.norm(ablated_h - clean_h) / max(np.linalg.norm(clean_h), 1e-30)),
                   ablation_prediction="(no output head)")
    if c.config.lm_head:
        before, after = c.trace.logits_at([c.position])[0], ablated.logits_at([c.position])[0]
        name = lambda t: piece_text(c.model.tokenizer.id_to_token(int(np.argmax(t))) or "?")
        numbers["ablation_prediction"] = f"'{name(before)}' before, '{name(after)}' after"
    return numbers


@_register
def read_scores(c: Context) -> dict:
    """A score recomputed from this text's q and k (the fixed W_Q, W_K applied to this input):
    q_i·k_j/√d_head against the trace's, for the key the selected token weights most."""
    layer, head, i = c.state.layer, c.state.head, c.position
    q = c.trace.head_array("q", layer, head)[i].astype(np.float64)
    j = int(np.argmax(_weights(c)))
    k = c.trace.head_array("k", layer, head)[j].astype(np.float64)
    traced = _f(c.trace.head_array("scores", layer, head)[i, j])             # scaled, before the mask
    mine = _f(q @ k / np.sqrt(c.config.d_head))
    w_q = c.model.params.shape(f"h.{layer}.attn.q.w")
    return dict(score_key=c.label(j), score=traced, score_recomputed=mine,
                score_difference=abs(traced - mine), w_q_shape=" × ".join(str(n) for n in w_q))


@_register
def read_prediction(c: Context) -> dict:
    i = c.trace.n_seq - 1
    probs = measures.top_k_probabilities(c.trace.logits_at([i])[0], 1)
    ids, values = probs
    token = c.model.tokenizer.id_to_token(int(ids[0])) or "?"
    return dict(next_token=piece_text(token), next_probability=_f(values[0]), last_token=c.label(i),
                focus=i)


# -- training ------------------------------------------------------------------------------------
@_register
def read_training(c: Context) -> dict:
    return dict(_one_training_batch(), walk_steps=WALK_TRAINING_STEPS)


@lru_cache(maxsize=1)
def _one_training_batch() -> tuple:
    """One batch of the project's own quick recipe through its training network: the lookup's
    gradient touches only the batch's rows; a tied head's touches every row."""
    from ..training import corpus, network, recipe
    from ..training.loop import pad_batch

    quick = recipe.QUICK
    dataset = recipe.build_dataset(quick, with_heldout=False)
    tokenizer = dataset.tokenizer
    config = quick.model_config(tokenizer.get_vocab_size(with_added_tokens=True))
    params = recipe.initial_params(quick, config)
    ids, targets, weights = pad_batch(dataset.train_sequences[:8], tokenizer.token_to_id(corpus.PAD))
    parts: dict = {}
    loss, _ = network.loss_and_grads(params, config, ids, targets, weights, parts)
    lookup_rows = int(np.count_nonzero(np.any(parts["lookup"] != 0, axis=1)))
    head_rows = int(np.count_nonzero(np.any(parts["head"] != 0, axis=1)))
    return tuple(dict(train_loss=_f(loss), train_vocab=config.n_vocab, lookup_rows=lookup_rows,
                      batch_distinct_ids=int(len(np.unique(ids))), batch_size=len(ids),
                      head_rows=head_rows, tied="tied" if config.tied_head else "untied").items())

