"""The positions laboratory: the built-in recipe trained five ways (issue 13), same corpus,
seed, steps and optimiser, only the position scheme differs.

    sum_sinusoidal  x0 = e + p, p the fixed sinusoids (the shipped model)
    sum_learned     x0 = e + p, p a learned row per position (GPT-2, BERT)
    concat          x0 = [e | p]: e of width d_model - d_position, p the sinusoids of width
                    d_position (same d_model, so fewer token dimensions: the honest trade-off)
    rotary          x0 = e; q and k turned per head before the scores (Llama)
    none            x0 = e; only the causal mask (and depth) can tell positions apart

d_position = d_model // 4 (16 of 64): 8 sin/cos pairs, wavelengths from 2π to ~20,000
positions, enough to tell the 128 positions of n_ctx apart, and 48 dimensions left for tokens.
The concat head is tied and reads the token part (see core/model/forward.py).

`measure` adds what the issue asks of each variant beyond train_builtin's held-out accuracy,
loss and per-phenomenon accuracy: the E-P interference measures (for models with a p vector)
and a linear probe of position from each layer's output (how much order the residual stream
carries; for `none`, how much the causal mask leaks)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..model import ops
from ..model.config import ModelConfig
from ..model.errors import ModelError
from ..model.forward import forward
from .loop import ProgressCallback
from .recipe import Dataset, Recipe, TrainedModel, build_dataset, new_history, train_builtin

VARIANTS = ("sum_sinusoidal", "sum_learned", "concat", "rotary", "none")
_POSITION = {"sum_sinusoidal": "sinusoidal", "sum_learned": "learned", "concat": "concat",
             "rotary": "rotary", "none": "none"}
SUBSPACE_ENERGY = 0.9           # P's subspace: the fewest principal directions holding 90% of it
N_PROBE_SEQUENCES = 300         # held-out passages the position probe reads
CURVE_POINTS = 100              # training-loss curve: at most this many window means
HELDOUT_POINTS = 20             # held-out loss (on recipe.WATCHED_HELDOUT passages) this many times


@dataclass(frozen=True)
class VariantRecipe(Recipe):
    """The built-in recipe with the position scheme as a field (recipe.json records it)."""
    variant: str = "sum_sinusoidal"
    d_position: int = 0             # concat only

    def model_config(self, n_vocab: int) -> ModelConfig:
        return super().model_config(n_vocab).replace(
            position=_POSITION[self.variant], d_position=self.d_position,
            name=f"positions lab: {self.variant}, seed {self.seed}")


def variant_recipe(variant: str, base: Recipe = Recipe()) -> VariantRecipe:
    if variant not in VARIANTS:
        raise ModelError(f"positions lab: unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(Recipe)}
    d_position = 2 * max(1, base.d_model // 8) if variant == "concat" else 0   # d_model // 4, even
    return VariantRecipe(**fields, variant=variant, d_position=d_position)


def train_variant(variant: str, base: Recipe = Recipe(), dataset: Optional[Dataset] = None,
                  callback: ProgressCallback = None) -> TrainedModel:
    """Train one variant with train_builtin; result gains the loss curve (training and held-out)
    and `measure`'s figures. Pass the same `dataset` to every variant to build the corpus once.
    The history that records the held-out loss only reads: the weights are those of a run
    without it."""
    recipe = variant_recipe(variant, base)
    dataset = dataset or build_dataset(recipe)
    history = new_history(recipe, dataset, max_snapshots=2,
                          heldout_every=max(1, recipe.steps // HELDOUT_POINTS))
    trained = train_builtin(recipe, callback, dataset, history=history)
    trained.result["curve"] = loss_curve(history.losses, history=history)
    trained.result.update(measure(trained.params, trained.config, dataset))
    return trained


def loss_curve(losses: Sequence[float], points: int = CURVE_POINTS, history=None) -> dict:
    """Training losses as window means: {"step": last step of each window, "loss": its mean};
    with a TrainingHistory also its held-out losses ("heldout_step", "heldout_loss") and the
    unigram baseline's held-out loss ("unigram_loss")."""
    window = max(1, -(-len(losses) // points))
    steps, means = [], []
    for start in range(0, len(losses), window):
        chunk = losses[start:start + window]
        steps.append(start + len(chunk))
        means.append(round(float(np.mean(chunk)), 5))
    curve = {"step": steps, "loss": means}
    if history is not None and history.heldout_steps:
        curve["heldout_step"] = [int(s) for s in history.heldout_steps]
        curve["heldout_loss"] = [round(float(v), 5) for v in history.heldout_losses]
        curve["unigram_loss"] = round(float(history.unigram_loss), 5)
    return curve


# ------------------------------------------------------------------------------ measures
def measure(params, config: ModelConfig, dataset: Dataset) -> dict:
    """The E-P interference measures (None for rotary and none: there is no p) and the
    position probe, on the dataset's held-out passages."""
    n_positions = min(config.n_ctx, max(len(s) for s in dataset.train_sequences) - 1)
    used_ids = np.unique(np.concatenate(dataset.train_sequences))
    out = {"interference": interference(params, config, used_ids, n_positions)}
    if dataset.heldout_sequences:
        out["position_probe_r2"] = position_probe(params, config,
                                                  dataset.heldout_sequences[:N_PROBE_SEQUENCES])
    return out


def position_vectors(config: ModelConfig, params, n_positions: int) -> Optional[np.ndarray]:
    """[n_positions, width] the p the model adds or concatenates, or None (rotary, none)."""
    if config.position in ("sinusoidal", "concat"):
        return ops.sinusoid_table(n_positions, config.d_position or config.d_model)
    if config.position == "learned":
        return np.asarray(params["wpe"][config.position_offset:config.position_offset + n_positions])
    return None


def interference(params, config: ModelConfig, token_ids: Optional[np.ndarray], n_positions: int) -> Optional[dict]:
    """How much the position vectors P can disturb the token vectors E (rows of wte for
    `token_ids`, the tokens the corpus uses; None: every row), over positions 0..n_positions-1:
      e_variance_in_p_subspace  share of E's variance (E centred) in the span of P's top
                                principal directions (uncentred, SUBSPACE_ENERGY of P's energy);
                                random_share is what a random subspace that wide would hold
      principal_angle_cosines   cosines of the principal angles between that span and E's own
                                (top directions with SUBSPACE_ENERGY of its variance)
      mean_abs_cos              mean |cos(e, p)| over every token and position
      rms_e, rms_p              per-dimension RMS of e (over tokens) and p (over positions)
    concat models: the two live in disjoint dimensions, overlap 0 by construction. Works for
    any model with a learned or sinusoidal table (GPT-2, BERT: their real tables). E is read
    ROW_BLOCK rows at a time in float64 and reduced to [d, d] Gram matrices, so GPT-2's
    50,257 x 768 table costs blocks, not float64 copies of the whole table."""
    positions = position_vectors(config, params, n_positions)
    if positions is None:
        return None
    table = np.asarray(params["wte"])
    token_ids = np.arange(len(table)) if token_ids is None else np.asarray(token_ids)
    p = positions.astype(np.float64)
    n_tokens, d = len(token_ids), table.shape[1]
    total, squares = np.zeros(d), np.zeros(d)
    for block in _row_blocks(table, token_ids):
        total += block.sum(axis=0)
        squares += (block ** 2).sum(axis=0)
    mean = total / n_tokens
    rms_e, rms_p = np.sqrt(squares / n_tokens), np.sqrt(np.mean(p ** 2, axis=0))
    common = {"n_tokens": int(n_tokens), "n_positions": int(n_positions),
              "rms_e": [round(float(v), 5) for v in rms_e], "rms_p": [round(float(v), 5) for v in rms_p]}
    if config.position == "concat":
        return {**common, "e_variance_in_p_subspace": 0.0, "random_share": 0.0, "p_rank": None,
                "principal_angle_cosines": [], "mean_abs_cos": 0.0}
    centred_gram = np.zeros((d, d))                              # (E - mean)ᵀ(E - mean)
    unit_p = p / np.linalg.norm(p, axis=1, keepdims=True)
    abs_cos = 0.0
    for block in _row_blocks(table, token_ids):
        centred = block - mean
        centred_gram += centred.T @ centred
        abs_cos += float(np.abs((block / np.linalg.norm(block, axis=1, keepdims=True)) @ unit_p.T).sum())
    p_basis = _top_directions(p.T @ p, SUBSPACE_ENERGY)          # [d, k_p]
    e_basis = _top_directions(centred_gram, SUBSPACE_ENERGY)     # [d, k_e]
    share = float(np.trace(p_basis.T @ centred_gram @ p_basis) / np.trace(centred_gram))
    cosines = np.linalg.svd(e_basis.T @ p_basis, compute_uv=False)
    return {**common, "e_variance_in_p_subspace": round(share, 5),
            "random_share": round(p_basis.shape[1] / d, 5), "p_rank": int(p_basis.shape[1]),
            "e_rank": int(e_basis.shape[1]),
            "principal_angle_cosines": [round(float(c), 5) for c in cosines],
            "mean_abs_cos": round(abs_cos / (n_tokens * len(p)), 5)}


ROW_BLOCK = 4096                # rows of E per block (GPT-2: 13 blocks of 4096 x 768)


def _row_blocks(table: np.ndarray, token_ids: np.ndarray):
    # the rows of `table` for `token_ids`, ROW_BLOCK at a time, as float64
    for start in range(0, len(token_ids), ROW_BLOCK):
        yield np.asarray(table[token_ids[start:start + ROW_BLOCK]], dtype=np.float64)


def _top_directions(gram: np.ndarray, energy: float) -> np.ndarray:
    # [d, d] Gram matrix of rows -> [d, k]: the principal directions of those rows (eigenvectors
    # of the Gram matrix, largest first) holding `energy` of their squared norm
    values, vectors = np.linalg.eigh(gram)
    order = np.argsort(values)[::-1]
    values, vectors = np.clip(values[order], 0.0, None), vectors[:, order]
    cumulative = np.cumsum(values) / np.sum(values)
    k = int(np.searchsorted(cumulative, energy) + 1)
    return vectors[:, :k]


def table_positions(config: ModelConfig, params) -> int:
    """How many positions the model's own position table covers (learned: its rows past the
    offset; sinusoids: n_ctx); 0 when it has none (rotary, none)."""
    if config.position == "learned":
        return int(np.asarray(params["wpe"]).shape[0]) - config.position_offset
    if config.position in ("sinusoidal", "concat"):
        return int(config.n_ctx)
    return 0


def model_interference(params, config: ModelConfig) -> Optional[dict]:
    """`interference` of any opened model over every row of its token table and every position
    of its position table (GPT-2: 50,257 x 1,024); None when it adds no position vector."""
    n_positions = table_positions(config, params)
    if not n_positions:
        return None
    return interference(params, config, None, n_positions)


def position_probe(params, config: ModelConfig, sequences: Sequence[np.ndarray]) -> list[float]:
    """R² of a least-squares linear probe predicting the position index from each hidden state
    (the embedding output, then every layer's output), fitted on the first half of the
    sequences and scored on the second: how much order the residual stream carries. The
    embedding output of `none` is the baseline: what the tokens alone say about where they are
    (the corpus's word order)."""
    states: dict[int, list[np.ndarray]] = {}
    positions, halves = [], []
    for number, seq in enumerate(sequences):
        ids = seq[:-1]
        recorded: dict[int, np.ndarray] = {}

        def record(name, value, layer=None, recorded=recorded):
            if name == "embedding_output":
                recorded[0] = value
            elif name == "layer_out":
                recorded[layer + 1] = value

        forward(params, config, ids, record=record)
        for depth, value in recorded.items():
            states.setdefault(depth, []).append(value.astype(np.float64))
        positions.append(np.arange(len(ids), dtype=np.float64))
        halves.append(np.full(len(ids), number >= len(sequences) // 2))
    target, test = np.concatenate(positions), np.concatenate(halves)
    scores = []
    for depth in sorted(states):
        x = np.concatenate(states[depth])
        x = np.concatenate([x, np.ones((len(x), 1))], axis=1)
        weights, *_ = np.linalg.lstsq(x[~test], target[~test], rcond=None)
        residual = target[test] - x[test] @ weights
        scores.append(round(float(1.0 - residual.var() / target[test].var()), 5))
    return scores
