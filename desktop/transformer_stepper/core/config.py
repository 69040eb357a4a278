"""One frozen description of an architecture; the families differ only in field values."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from .errors import ModelError

Position = Literal["learned", "sinusoidal"]
NormPlacement = Literal["pre", "post"]
Activation = Literal["gelu_erf", "gelu_tanh", "relu"]


@dataclass(frozen=True)
class ModelConfig:
    family: str            # "bert", "gpt2", "stepper" (the built-in model): for display only
    n_vocab: int
    n_ctx: int             # longest sequence the position scheme supports
    d_model: int
    n_head: int
    n_layer: int
    d_ff: int
    position: Position = "learned"
    norm: NormPlacement = "pre"      # pre-LN (GPT-2) or post-LN (BERT, the 2017 paper)
    embed_norm: bool = False         # a LayerNorm right after the embedding sum (BERT)
    n_token_types: int = 0           # BERT's segment embeddings; 0 = none
    causal: bool = False
    activation: Activation = "gelu_erf"
    ln_eps: float = 1e-5
    final_norm: bool = False         # ln_f after the last block (GPT-2)
    lm_head: bool = False            # logits = h @ wte.T (+ BERT's transform when present)
    lm_head_transform: bool = False  # BERT MLM: dense -> gelu -> LayerNorm before the tied decoder
    name: str = ""

    def __post_init__(self) -> None:
        for field in ("n_vocab", "n_ctx", "d_model", "n_head", "n_layer", "d_ff"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ModelError(f"config: {field} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ModelError(
                f"config: d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.position not in ("learned", "sinusoidal"):
            raise ModelError(f"config: unknown position scheme {self.position!r}")
        if self.norm not in ("pre", "post"):
            raise ModelError(f"config: unknown norm placement {self.norm!r}")
        if self.activation not in ("gelu_erf", "gelu_tanh", "relu"):
            raise ModelError(f"config: unsupported activation {self.activation!r}")
        if self.position == "sinusoidal" and self.d_model % 2:
            raise ModelError(f"config: sinusoidal positions need an even d_model, got {self.d_model}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

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
