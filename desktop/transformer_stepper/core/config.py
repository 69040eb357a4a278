"""One frozen description of an architecture; the families differ only in field values."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from .errors import ModelError

Position = Literal["learned", "sinusoidal", "rotary", "none", "concat"]
NormPlacement = Literal["pre", "post"]
NormKind = Literal["layer", "rms"]
Activation = Literal["gelu_erf", "gelu_tanh", "relu", "silu"]
RopeScaling = Literal["", "linear", "llama3"]

POSITIONS = ("learned", "sinusoidal", "rotary", "none", "concat")
NORM_KINDS = ("layer", "rms")
ACTIVATION_NAMES = ("gelu_erf", "gelu_tanh", "relu", "silu")
ROPE_SCALINGS = ("", "linear", "llama3")
# Sane upper limits, far above any released model (Llama 3.1 405B: 126 layers, d_model 16384,
# d_ff 53248; Gemma: 256k vocabulary; 1M-token contexts): a config asking for more is an
# error, not an allocation proportional to it (num_hidden_layers: 1000000000 in a 1 KB file)
LIMITS = {"n_vocab": 1 << 24, "n_ctx": 1 << 24, "d_model": 1 << 17, "n_head": 1 << 12,
          "n_layer": 1 << 12, "d_ff": 1 << 19, "n_kv_head": 1 << 12, "head_dim": 1 << 14,
          "position_offset": 1 << 24, "sliding_window": 1 << 24, "d_position": 1 << 17,
          "n_token_types": 1 << 16, "rope_original_n_ctx": 1 << 24}
_FLAGS = ("embed_norm", "causal", "gated_mlp", "final_norm", "lm_head", "lm_head_transform",
          "tied_head", "qkv_bias", "o_bias", "mlp_bias", "qk_norm")
# float fields -> must they be > 0 (else >= 0)
_NUMBERS = {"ln_eps": False, "embed_scale": True, "rope_theta": True, "rope_factor": True,
            "rope_low_freq_factor": True, "rope_high_freq_factor": True}


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
    norm: NormPlacement = "pre"      # pre-LN (GPT-2, Llama) or post-LN (BERT, the 2017 paper)
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
    embed_scale: float = 1.0         # token rows multiplied by this (Gemma: √d_model)
    position_offset: int = 0         # first position id (RoBERTa: padding_idx + 1)
    sliding_window: int = 0          # a query sees at most this many keys, itself included (0 = all)
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = ""   # "" none, "linear", "llama3"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_n_ctx: int = 8192
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
                                     ("norm", ("pre", "post"), "unknown norm placement"),
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

    def _check_types(self) -> None:
        """Every field its type and range (bool is not an integer here: n_ctx: true is refused)."""
        for field in ("n_vocab", "n_ctx", "d_model", "n_head", "n_layer", "d_ff", "rope_original_n_ctx"):
            value = getattr(self, field)
            if type(value) is not int or value <= 0:
                raise ModelError(f"config: {field} must be a positive integer, got {value!r}")
        for field in ("n_kv_head", "head_dim", "position_offset", "sliding_window", "d_position",
                      "n_token_types"):
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
        return cls(**data)
