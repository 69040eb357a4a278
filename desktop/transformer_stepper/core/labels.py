"""How architecture fields read on screen: one table, so views and explanations agree."""
from __future__ import annotations

ACTIVATION_LABELS = {"gelu_erf": "GELU (exact, with erf)", "gelu_tanh": "GELU (tanh approximation)",
                     "relu": "ReLU", "silu": "SiLU (x·sigmoid(x))"}
ACTIVATION_SHORT = {"gelu_erf": "GELU", "gelu_tanh": "GELU (tanh)", "relu": "ReLU", "silu": "SiLU"}
NORM_LABELS = {"layer": "LayerNorm", "rms": "RMSNorm"}
POSITION_LABELS = {"learned": "learned position rows, added", "sinusoidal": "fixed sinusoids, added",
                   "rotary": "rotary: q and k turned by position", "none": "no position information"}
