"""One frozen description of an architecture; the families differ only in field values."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from .errors import ModelError

Position = Literal["learned", "sinusoidal", "rotary", "none", "concat"]
NormPlacement = Literal["pre", "post", "sandwich", "branch_out"]
QKNormOver = Literal["head", "projection"]
NormKind = Literal["layer", "rms"]
Activation = Literal["gelu_erf", "gelu_tanh", "relu", "silu"]
RopeScaling = Literal["", "linear", "llama3", "dynamic", "yarn", "longrope"]

POSITIONS = ("learned", "sinusoidal", "rotary", "none", "concat")
NORM_KINDS = ("layer", "rms")
ACTIVATION_NAMES = ("gelu_erf", "gelu_tanh", "relu", "silu")
NORM_PLACEMENTS = ("pre", "post", "sandwich", "branch_out")
ROPE_SCALINGS = ("", "linear", "llama3", "dynamic", "yarn", "longrope")
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")   # frequencies change with the text's length
# Sane upper limits, far above any released model (Llama 3.1 405B: 126 layers, d_model 16384,
# d_ff 53248; Gemma: 256k vocabulary; 1M-token contexts): a config asking for more is an
# error, not an allocation proportional to it (num_hidden_layers: 1000000000 in a 1 KB file)
LIMITS = {"n_vocab": 1 << 24, "n_ctx": 1 << 24, "d_model": 1 << 17, "n_head": 1 << 12,
          "n_layer": 1 << 12, "d_ff": 1 << 19, "n_kv_head": 1 << 12, "head_dim": 1 << 14,
          "position_offset": 1 << 24, "sliding_window": 1 << 24, "d_position": 1 << 17,
          "n_token_types": 1 << 16, "rope_original_n_ctx": 1 << 24, "rotary_dim": 1 << 14,
          "n_expert": 1 << 12, "n_expert_used": 1 << 12, "d_expert": 1 << 19, "d_shared_expert": 1 << 19,
          "kv_lora_rank": 1 << 16, "q_lora_rank": 1 << 16, "v_head_dim": 1 << 14, "n_expert_groups": 1 << 12,
          "topk_groups": 1 << 12}
_FLAGS = ("embed_norm", "causal", "gated_mlp", "final_norm", "lm_head", "lm_head_transform",
          "tied_head", "qkv_bias", "o_bias", "mlp_bias", "qk_norm", "skip_pad_positions",
          "parallel_residual", "rope_truncate", "norm_topk", "attn_sinks", "router_bias",
          "clamped_swiglu", "shared_expert_gate")
# float fields -> must they be > 0 (else >= 0)
_NUMBERS = {"ln_eps": False, "embed_scale": True, "rope_theta": True, "rope_factor": True,
            "rope_low_freq_factor": True, "rope_high_freq_factor": True,
            "rope_attention_factor": True, "rope_beta_fast": False, "rope_beta_slow": False,
            "swiglu_alpha": True, "swiglu_limit": True, "attn_mscale": True, "routed_scale": True}
ROUTER_ORDERS = ("softmax_topk", "topk_softmax")


@dataclass(frozen=True)
class ModelConfig:
    family: str            # "bert", "gpt2", "llama", ..., "stepper" (the built-in model): display
    n_vocab: int
    n_ctx: int             # longest sequence the position scheme supports
    d_model: int
    n_head: int
    n_layer: int
    d_ff: int
    position: Position = "learned"   # added vector (learned, sinusoidal), q/k rotation, none, or
                                     # concat: x0 = [e | p], p the sinusoids of width d_position
    d_position: int = 0              # concat: width of the position part (token part: d_model - it)
    norm: NormPlacement = "pre"      # pre-LN (GPT-2, Llama) or post-LN (BERT, the 2017 paper);
                                     # sandwich: pre-LN plus a norm of each branch's output before
                                     # the add (Gemma 2/3: post_attn_ln, post_mlp_ln); branch_out:
                                     # only those output norms, none before (OLMo 2)
    norm_kind: NormKind = "layer"    # LayerNorm (mean, variance, γ, β) or RMSNorm (RMS, γ)
    embed_norm: bool = False         # a LayerNorm right after the embedding sum (BERT)
    n_token_types: int = 0           # BERT's segment embeddings; 0 = none
    causal: bool = False
    activation: Activation = "gelu_erf"
    gated_mlp: bool = False          # down(act(gate(x)) * up(x)) (SwiGLU, GeGLU) instead of proj(act(fc(x)))
    ln_eps: float = 1e-5
    final_norm: bool = False         # a norm after the last block (GPT-2, Llama)
    lm_head: bool = False            # logits from the output head (+ BERT's transform when present)
    lm_head_transform: bool = False  # BERT MLM: dense -> gelu -> LayerNorm before the decoder
    tied_head: bool = True           # the output head is wte itself; else its own lm_head.w
    n_kv_head: int = 0               # grouped-query attention: K/V heads (0 = n_head)
    head_dim: int = 0                # width of one head (0 = d_model // n_head)
    qkv_bias: bool = True            # biases on the q, k, v projections
    o_bias: bool = True              # ... on the output projection
    mlp_bias: bool = True            # ... on the feed-forward projections
    qk_norm: bool = False            # RMSNorm of each q and k head before the rotation (Qwen3)
    qk_norm_over: QKNormOver = "head"  # ... or of the whole q and k projections (OLMo 2)
    embed_scale: float = 1.0         # token rows multiplied by this (Gemma: √d_model)
    position_offset: int = 0         # first position id (RoBERTa: padding_idx + 1)
    skip_pad_positions: bool = False # RoBERTa: the pad token (id position_offset - 1) gets position
                                     # padding_idx and is not counted (create_position_ids_from_input_ids)
    sliding_window: int = 0          # a query sees at most this many keys, itself included (0 = all)
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = ""   # "" none, "linear", "llama3", "dynamic", "yarn", "longrope"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_n_ctx: int = 8192  # llama3, yarn, longrope: pre-training context; dynamic: the
                                     # context beyond which the base grows (max_position_embeddings)
    rope_attention_factor: float = 1.0   # yarn, longrope: cos and sin multiplied by it
    rope_beta_fast: float = 32.0         # yarn: the ramp between extrapolated and interpolated pairs
    rope_beta_slow: float = 1.0
    rope_truncate: bool = True           # yarn: ramp bounds rounded to whole dimensions
    rope_short_factor: tuple = ()        # longrope: per-pair divisors up to rope_original_n_ctx
    rope_long_factor: tuple = ()         # ... and beyond it
    rotary_dim: int = 0              # partial rotary: the first rotary_dim dims of a head turn (0 = all)
    parallel_residual: bool = False  # x + attn(ln_1(x)) + mlp(ln_2(x)): both read the same x (GPT-NeoX)
    query_scale: float = 0.0         # scores scaled by query_scale^-1/2 (Gemma 2/3's
                                     # query_pre_attn_scalar); 0 = by d_head^-1/2
    attn_softcap: float = 0.0        # scores -> cap·tanh(scores / cap) before the mask (Gemma 2); 0 = none
    final_softcap: float = 0.0       # logits -> cap·tanh(logits / cap) (Gemma 2); 0 = none
    local_layers: tuple = ()         # the layers with the sliding window and rope_local_theta
                                     # (Gemma 2/3); () = every layer (Mistral's window)
    rope_local_theta: float = 0.0    # local layers' rope base, unscaled (Gemma 3); 0 = rope_theta
    nope_layers: tuple = ()          # layers whose q and k are not rotated (SmolLM3's NoPE layers)
    # mixture of experts (core/model/moe.py): 0 experts = a dense feed-forward in every layer
    n_expert: int = 0                # routed experts per MoE layer (Mixtral 8, Qwen3-30B-A3B 128)
    n_expert_used: int = 0           # top-k: experts each token is sent to
    d_expert: int = 0                # one expert's hidden width (0 = d_ff)
    norm_topk: bool = False          # the k chosen probabilities divided by their sum (Mixtral: always)
    dense_layers: tuple = ()         # layers of an MoE model with the dense feed-forward (d_ff wide)
    d_shared_expert: int = 0         # a shared expert every token passes through, with its sigmoid
                                     # gate (Qwen2-MoE); 0 = none
    router_bias: bool = False        # the router's logits have a bias (gpt-oss)
    router_order: str = "softmax_topk"   # softmax over every expert, then the top-k (Mixtral ...), or
                                     # "topk_softmax": the top-k logits, then a softmax over those (gpt-oss)
    clamped_swiglu: bool = False     # an expert's hidden = (clip(up, ±limit) + 1) · g·sigmoid(alpha·g),
                                     # g = min(gate, limit) (gpt-oss); else silu(gate) · up
    swiglu_alpha: float = 1.702      # ... its sigmoid's gain
    swiglu_limit: float = 7.0        # ... and its clamp
    attn_sinks: bool = False         # a learned logit per head joins every softmax row as a column no
                                     # value is read from (gpt-oss): a row's weights sum to less than 1
    shared_expert_gate: bool = True  # ... scaled by sigmoid(x · w_shared_gate) (Qwen2-MoE); False:
                                     # added as it is (DeepSeek-V2's shared experts)
    routed_scale: float = 1.0        # the chosen experts' gates multiplied by it (DeepSeek's
                                     # routed_scaling_factor)
    n_expert_groups: int = 0         # group-limited routing (DeepSeek-V2's group_limited_greedy): the
    topk_groups: int = 0             # experts in n_expert_groups groups, each token's top-k taken
                                     # among the topk_groups groups of highest best probability; 0 = off
    # multi-head latent attention (DeepSeek-V2, core/model/mla.py): kv_lora_rank > 0 makes keys and
    # values from a per-token latent of that width; head_dim is then the q/k head width
    # (qk_nope_head_dim + qk_rope_head_dim) and rotary_dim the rotated tail of it (qk_rope_head_dim)
    kv_lora_rank: int = 0            # width of the latent c_kv (what the KV cache holds); 0 = no MLA
    q_lora_rank: int = 0             # q through a low-rank latent (q_a, RMSNorm, q_b); 0 = one q matrix
    v_head_dim: int = 0              # width of a value head (0 = head_dim)
    attn_mscale: float = 1.0         # scores also multiplied by attn_mscale² (DeepSeek's YaRN
                                     # mscale_all_dim correction of the softmax scale)
    name: str = ""

    def __post_init__(self) -> None:
        self._check_types()
        if not self.head_dim and self.d_model % self.n_head:
            raise ModelError(
                f"config: d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.n_head % self.n_kv_heads:
            raise ModelError(f"config: n_head={self.n_head} is not divisible by "
                             f"n_kv_head={self.n_kv_heads} (each K/V head serves a whole group)")
        for field, allowed, what in (("position", POSITIONS, "unknown position scheme"),
                                     ("norm", NORM_PLACEMENTS, "unknown norm placement"),
                                     ("qk_norm_over", ("head", "projection"), "unknown q/k norm span"),
                                     ("norm_kind", NORM_KINDS, "unknown norm kind"),
                                     ("activation", ACTIVATION_NAMES, "unsupported activation"),
                                     ("rope_scaling", ROPE_SCALINGS, "unsupported rope scaling")):
            if getattr(self, field) not in allowed:
                raise ModelError(f"config: {what} {getattr(self, field)!r}")
        if self.position == "sinusoidal" and self.d_model % 2:
            raise ModelError(f"config: sinusoidal positions need an even d_model, got {self.d_model}")
        if self.position == "rotary" and self.d_head % 2:
            raise ModelError(f"config: rotary positions need an even head width, got {self.d_head}")
        self._check_concat()
        if self.lm_head_transform and not self.lm_head:
            raise ModelError("config: lm_head_transform needs lm_head")
        self._check_layer_kinds()
        self._check_rotary()

    def _check_layer_kinds(self) -> None:
        # per-layer attention (local/global windows, rope bases, NoPE layers) and soft-capping
        for field in ("local_layers", "nope_layers", "dense_layers"):
            layers = getattr(self, field)
            if not isinstance(layers, tuple) or any(type(i) is not int for i in layers) or \
                    list(layers) != sorted(set(layers)) or any(not 0 <= i < self.n_layer for i in layers):
                raise ModelError(f"config: {field} must be increasing layer indices below "
                                 f"n_layer={self.n_layer}, got {layers!r}")
        if self.n_expert and not 0 < self.n_expert_used <= self.n_expert:
            raise ModelError(f"config: n_expert_used={self.n_expert_used} must be between 1 and "
                             f"n_expert={self.n_expert}")
        if self.n_expert_groups and (self.n_expert % self.n_expert_groups
                                     or not 0 < self.topk_groups <= self.n_expert_groups):
            raise ModelError(f"config: {self.n_expert} experts in n_expert_groups={self.n_expert_groups} "
                             f"groups keeping topk_groups={self.topk_groups}: not a valid grouping")
        if self.kv_lora_rank and (self.position != "rotary" or not self.rotary_dim
                                  or self.n_kv_heads != self.n_head):
            raise ModelError("config: latent attention (kv_lora_rank) needs a rotated tail "
                             "(rotary_dim) and one K/V head per query head")
        if (self.q_lora_rank or self.v_head_dim) and not self.kv_lora_rank:
            raise ModelError("config: q_lora_rank and v_head_dim are for latent attention (kv_lora_rank)")
        if not self.n_expert and (self.n_expert_used or self.dense_layers or self.d_shared_expert):
            raise ModelError("config: n_expert_used, dense_layers and d_shared_expert need n_expert")
        if self.router_order not in ROUTER_ORDERS:
            raise ModelError(f"config: router_order must be one of {', '.join(ROUTER_ORDERS)}, "
                             f"got {self.router_order!r}")
        if self.n_expert and not self.gated_mlp:
            raise ModelError("config: experts are gated feed-forwards (gated_mlp)")
        if self.local_layers and not (self.sliding_window or self.rope_local_theta):
            raise ModelError("config: local_layers need a sliding_window or a rope_local_theta")
        for field in ("query_scale", "attn_softcap", "final_softcap", "rope_local_theta"):
            value = getattr(self, field)
            if type(value) not in (int, float) or not value >= 0 or value == float("inf"):
                raise ModelError(f"config: {field} must be a non-negative number, got {value!r}")

    def is_local(self, layer: int) -> bool:
        """Does this layer use the sliding window (and the local rope base)?"""
        if self.local_layers:
            return layer in self.local_layers
        return bool(self.sliding_window)

    @property
    def is_moe(self) -> bool:
        """A mixture-of-experts model (some layers route each token to n_expert_used experts)."""
        return self.n_expert > 0

    def is_moe_layer(self, layer: int) -> bool:
        """Is this layer's feed-forward routed to experts (core/model/moe.py)?"""
        return self.n_expert > 0 and layer not in self.dense_layers

    @property
    def d_expert_ff(self) -> int:
        """Hidden width of one routed expert."""
        return self.d_expert or self.d_ff

    def has_rope(self, layer: int) -> bool:
        """Are this layer's q and k rotated? (rotary models, except their NoPE layers)"""
        return self.position == "rotary" and layer not in self.nope_layers

    @property
    def norms_branch_input(self) -> bool:
        """ln_1 / ln_2 normalise the attention's and the feed-forward's input (pre-LN, sandwich)."""
        return self.norm in ("pre", "sandwich")

    @property
    def norms_branch_output(self) -> bool:
        """post_attn_ln / post_mlp_ln normalise each branch's output before the residual add."""
        return self.norm in ("sandwich", "branch_out")

    def _check_rotary(self) -> None:
        # partial rotary and the longrope factors (JSON gives lists: kept as tuples, hashable)
        for field in ("rope_short_factor", "rope_long_factor"):
            try:
                object.__setattr__(self, field, tuple(float(f) for f in getattr(self, field)))
            except (TypeError, ValueError):
                raise ModelError(f"config: {field} must be a list of numbers, "
                                 f"got {getattr(self, field)!r}") from None
        if self.rotary_dim and (self.rotary_dim % 2 or self.rotary_dim > self.d_head):
            raise ModelError(f"config: rotary_dim={self.rotary_dim} must be even and at most the "
                             f"head width {self.d_head}")
        if self.rope_scaling == "longrope":
            for field in ("rope_short_factor", "rope_long_factor"):
                if len(getattr(self, field)) != self.d_rotary // 2:
                    raise ModelError(f"config: {field} needs {self.d_rotary // 2} numbers (one per "
                                     f"rotated pair), got {len(getattr(self, field))}")
        if self.parallel_residual and self.norm != "pre":
            raise ModelError("config: parallel_residual needs pre-norm blocks")

    def _check_types(self) -> None:
        """Every field its type and range (bool is not an integer here: n_ctx: true is refused)."""
        for field in ("n_vocab", "n_ctx", "d_model", "n_head", "n_layer", "d_ff", "rope_original_n_ctx"):
            value = getattr(self, field)
            if type(value) is not int or value <= 0:
                raise ModelError(f"config: {field} must be a positive integer, got {value!r}")
        for field in ("n_kv_head", "head_dim", "position_offset", "sliding_window", "d_position",
                      "n_token_types", "rotary_dim", "n_expert", "n_expert_used", "d_expert",
                      "d_shared_expert", "kv_lora_rank", "q_lora_rank", "v_head_dim",
                      "n_expert_groups", "topk_groups"):
            value = getattr(self, field)
            if type(value) is not int or value < 0:
                raise ModelError(f"config: {field} must be a non-negative integer, got {value!r}")
        for field, limit in LIMITS.items():
            if getattr(self, field) > limit:
                raise ModelError(f"config: {field}={getattr(self, field)} is over the limit of "
                                 f"{limit} (no real model has that many)")
        for field in _FLAGS:
            if type(getattr(self, field)) is not bool:
                raise ModelError(f"config: {field} must be true or false, got {getattr(self, field)!r}")
        for field, positive in _NUMBERS.items():
            value = getattr(self, field)
            if (type(value) not in (int, float) or not math.isfinite(value) or value < 0
                    or (positive and value == 0)):
                kind = "a positive" if positive else "a non-negative"
                raise ModelError(f"config: {field} must be {kind} finite number, got {value!r}")
        for field in ("family", "name"):
            if not isinstance(getattr(self, field), str):
                raise ModelError(f"config: {field} must be text, got {getattr(self, field)!r}")

    def _check_concat(self) -> None:
        if self.position != "concat":
            if self.d_position:
                raise ModelError(f"config: d_position={self.d_position} is only for concat positions, "
                                 f"not {self.position!r}")
            return
        if not 0 < self.d_position < self.d_model or self.d_position % 2:
            raise ModelError(f"config: concat positions need an even d_position between 0 and "
                             f"d_model={self.d_model} (exclusive), got {self.d_position}")
        if self.n_token_types:
            raise ModelError("config: concat positions do not combine with token type embeddings")

    @property
    def d_token(self) -> int:
        """Width of a token embedding (a row of wte): d_model, or its token part under concat."""
        return self.d_model - self.d_position

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_head

    @property
    def d_v(self) -> int:
        """Width of a value head (and of a head's output): d_head, or latent attention's v_head_dim."""
        return self.v_head_dim or self.d_head

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: keys and values rebuilt from a cached latent (core/model/mla.py)."""
        return self.kv_lora_rank > 0

    @property
    def d_rotary(self) -> int:
        """Width of a head that rotary positions turn: all of it, or its first rotary_dim dims."""
        return self.rotary_dim or self.d_head

    @property
    def n_kv_heads(self) -> int:
        """K/V heads: n_head for ordinary attention, fewer for grouped-query attention."""
        return self.n_kv_head or self.n_head

    @property
    def group_size(self) -> int:
        """Query heads that read one K/V head."""
        return self.n_head // self.n_kv_heads

    def kv_head_of(self, head: int) -> int:
        """The K/V head query head `head` reads (as Hugging Face's repeat_kv lays them out)."""
        return head // self.group_size

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ModelError(f"config: unknown field(s) {', '.join(unknown)}")
        data = {k: tuple(v) if k in ("local_layers", "nope_layers", "dense_layers") and isinstance(v, list) else v
                for k, v in data.items()}
        return cls(**data)
