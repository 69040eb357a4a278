"""The stages the stepper walks, as data. Adding a stage = adding one entry to STAGES (and a
view registered under its key in ui/stages/, and an explanation in resources/explanations/).
Each entry also names the trace arrays behind it, which the array export writes."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import Callable, Optional

from .config import ModelConfig


@dataclass(frozen=True)
class Stage:
    key: str                   # stable identifier: view registry, explanation file, export names
    title: str
    per_layer: bool            # shown for the selected layer
    per_head: bool = False     # ... and for the selected head
    needs_lm_head: bool = False
    needs_positions: bool = False      # nothing to show for a model without position information
    needs_experts: bool = False        # only for a mixture-of-experts model (the Router)
    # the trace arrays behind the stage, as (trace name, indexing): "layer" takes [layer], "head"
    # [layer, head], "" the whole array; "mask" is Trace.mask; names a family lacks are skipped
    # (what an export of the stage writes)
    arrays: tuple[tuple[str, str], ...] = ()
    # the trace arrays this stage computes (its results; an array the view shows as an input
    # belongs to the stage that computed it): what the interventions' difference grid compares
    computes: tuple[str, ...] = ()
    # the one core function that computes the stage, as a dotted name under the package
    # ("core.model.forward.scores"): the stage list's tooltip, provenance and docs/architecture.md point at it
    function: str = ""
    # 1-based, as the stepper shows it: the stage's place in STAGES (numbered below), not kept by hand
    number: int = 0

    def compute_function(self) -> Callable:
        """The function `function` names (imported on use: core.trace.generate imports the model,
        which must not import the stage list back)."""
        package = __package__.split(".")[0]            # transformer_stepper
        parts = self.function.split(".")
        for cut in range(len(parts) - 1, 0, -1):         # the longest prefix that is a module
            try:
                owner = importlib.import_module(".".join([package, *parts[:cut]]))
            except ModuleNotFoundError:
                continue
            for name in parts[cut:]:
                owner = getattr(owner, name)
            return owner
        raise LookupError(f"stage {self.key}: no function {self.function}")

    def number_for(self, config: Optional[ModelConfig]) -> int:
        """The stage's number for this model: `number` (a dense model's, as DESIGN.md lists
        them), one more after the Router for a mixture-of-experts model."""
        if (config is not None and getattr(config, "is_moe", False) and not self.needs_experts
                and self.number >= ROUTER_NUMBER):
            return self.number + 1
        return self.number

    def available(self, config: Optional[ModelConfig]) -> bool:
        return not self.unavailable_because(config)

    def unavailable_because(self, config: Optional[ModelConfig]) -> str:
        """'' when the stage applies to this model, else why not, said of the model ("has no
        language-model head"): the stage list's tooltip, an export's note."""
        if self.needs_positions and config is not None and config.position == "none":
            return "has no position information (only the causal mask orders the tokens)"
        if self.needs_lm_head and not (config is not None and config.lm_head):
            return "has no language-model head"
        if self.needs_experts and not (config is not None and getattr(config, "is_moe", False)):
            return "has no mixture of experts (one feed-forward for every token)"
        return ""


def _numbered(*in_order: Stage) -> tuple[Stage, ...]:
    """The stages with each one's number its place in the list (1-based) among the stages every
    model has: the Router (a mixture-of-experts model's alone) takes the number of the stage it
    comes before, and number_for counts on by one after it for such a model."""
    numbered, place = [], 0
    for stage in in_order:
        if not stage.needs_experts:
            place += 1
        numbered.append(replace(stage, number=place + (1 if stage.needs_experts else 0)))
    return tuple(numbered)


STAGES: tuple[Stage, ...] = _numbered(
    Stage("tokenize", "Tokenize", per_layer=False,
          function="core.model.tokenize.Tokenizer.encode",
          arrays=(("input_ids", ""), ("offsets", ""), ("special_tokens_mask", ""),
                  ("token_type_ids", ""))),
    Stage("embedding", "Embedding lookup", per_layer=False,
          function="core.model.forward.lookup",
          arrays=(("input_ids", ""), ("token_embeddings", "")),
          computes=("token_embeddings", "token_embeddings_scaled")),
    Stage("position_encoding", "Position encoding", per_layer=False, needs_positions=True,
          function="core.model.forward.position_table",
          arrays=(("position_embeddings", ""), ("token_type_embeddings", "")),
          computes=("position_embeddings", "token_type_embeddings", "rope_angles")),
    Stage("position_addition", "Position addition", per_layer=False, needs_positions=True,
          function="core.model.forward.embed",
          arrays=(("token_embeddings", ""), ("position_embeddings", ""),
                  ("token_type_embeddings", ""), ("embedding_sum", ""),
                  ("embedding_ln_normalized", ""), ("embedding_output", "")),
          computes=("embedding_sum", "embedding_output")),
    Stage("qkv", "Q/K/V projection", per_layer=True, per_head=True,
          function="core.model.forward.qkv",
          arrays=(("attn_in", "layer"), ("kv_latent", "layer"), ("k_rope", "layer"), ("q", "head"),
                  ("k", "head"), ("v", "head")),
          computes=("attn_in", "kv_latent", "k_rope", "q_unrotated", "k_unrotated", "q", "k", "v")),
    Stage("scores", "Scores", per_layer=True, per_head=True,
          function="core.model.forward.scores",
          arrays=(("scores_raw", "head"), ("scores", "head"), ("mask", "")),
          computes=("scores_raw", "scores")),
    Stage("softmax", "Softmax", per_layer=True, per_head=True,
          function="core.model.forward.attention_weights",
          arrays=(("scores", "head"), ("attn_weights", "head")),
          computes=("attn_weights",)),
    Stage("weighted_sum", "Weighted sum", per_layer=True, per_head=True,
          function="core.model.forward.weighted_sum",
          arrays=(("attn_weights", "head"), ("v", "head"), ("head_outputs", "head")),
          computes=("head_outputs",)),
    Stage("output_projection", "Output projection and residual", per_layer=True,
          function="core.model.forward.output_projection",
          arrays=(("heads_concat", "layer"), ("attn_out", "layer"), ("attn_residual", "layer"),
                  ("ln_1_out", "layer")),
          computes=("heads_concat", "attn_out", "attn_residual")),
    Stage("router", "Router (mixture of experts)", per_layer=True, needs_experts=True,
          function="core.model.moe.route",
          arrays=(("mlp_in", "layer"), ("router_logits", "layer"), ("router_probs", "layer"),
                  ("expert_ids", "layer"), ("expert_gates", "layer"), ("expert_outputs", "layer"),
                  ("shared_expert_out", "layer"), ("shared_expert_gate", "layer")),
          computes=("router_logits", "router_probs", "expert_gates")),   # (ids: no distance to measure)
    Stage("feed_forward", "Feed-forward and residual", per_layer=True,
          function="core.model.forward.feed_forward",
          arrays=(("mlp_in", "layer"), ("mlp_pre_act", "layer"), ("mlp_act", "layer"),
                  ("mlp_out", "layer"), ("mlp_residual", "layer"), ("ln_2_out", "layer")),
          computes=("mlp_in", "mlp_pre_act", "mlp_act", "mlp_up", "mlp_gated", "expert_outputs",
                    "shared_expert_out", "shared_expert_gate", "mlp_out", "mlp_residual")),
    Stage("layer_output", "Layer output", per_layer=True,
          function="core.model.forward.block",
          arrays=(("layer_in", "layer"), ("layer_out", "layer")),
          computes=("layer_out",)),
    Stage("prediction", "Prediction", per_layer=False, needs_lm_head=True,
          function="core.model.forward.lm_head",
          arrays=(("final_ln_out", ""), ("head_transform", ""), ("logits", "")),
          computes=("final_ln_out", "logits")),
    # the lens is not in the trace (it needs the model's head): io/array_export.py's _lens_arrays
    Stage("logit_lens", "Logit lens", per_layer=False, needs_lm_head=True,
          function="core.trace.lens_blocks.lens_logits"),
)
# the Router's number (the feed-forward's in a dense model); a mixture-of-experts model's later
# stages count on by one (Stage.number_for)
ROUTER_NUMBER = next(stage.number for stage in STAGES if stage.needs_experts)

_BY_KEY = {stage.key: stage for stage in STAGES}


def stage(key: str) -> Stage:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown stage {key!r} (known: {', '.join(_BY_KEY)})") from None


def stage_computing(name: str) -> Optional[Stage]:
    """The stage whose function computes the trace array `name` ("scores" -> Scores), or None."""
    return next((s for s in STAGES if name in s.computes), None)


def available_stages(config: Optional[ModelConfig]) -> list[Stage]:
    return [s for s in STAGES if s.available(config)]


def step(key: str, layer: int, direction: int, config: ModelConfig) -> Optional[tuple[str, int]]:
    """The (stage key, layer) one step forward (+1) or back (-1) in the order the forward pass
    runs: the per-layer stages repeat once per layer, so stepping past the last per-layer stage
    enters the next layer. None at either end."""
    walk: list[tuple[str, int]] = []
    stages = available_stages(config)
    for s in stages:
        if not s.per_layer:
            walk.append((s.key, -1))
        elif s is next(x for x in stages if x.per_layer):
            per_layer = [x.key for x in stages if x.per_layer]
            walk.extend((k, i) for i in range(config.n_layer) for k in per_layer)
    current = stage(key)
    here = (key, layer if current.per_layer else -1)
    if here not in walk:
        return None
    index = walk.index(here) + (1 if direction > 0 else -1)
    if not 0 <= index < len(walk):
        return None
    new_key, new_layer = walk[index]
    return new_key, (layer if new_layer < 0 else new_layer)
