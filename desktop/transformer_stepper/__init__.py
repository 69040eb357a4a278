"""Transformer Stepper: step through what a transformer computes, with exact values.

    from transformer_stepper import load_model
    trace = load_model(PATH).trace("The bank of the river.")
    trace.hidden_states   # [n_layer + 1, n_seq, d_model]
    trace.attentions      # [n_layer, n_head, n_seq, n_seq]

    from transformer_stepper import compare
    result = compare(load_model(), ["He sat on the bank of the river .",
                                    "She kept the gold in the bank with the clerk ."], "bank")
    result.pair_cosines   # [n_pairs, n_layer + 1]
"""
from .core.analysis.compare import Comparison, compare
from .core.model.config import ModelConfig
from .core.model.errors import ModelError
from .core.model.interventions import (
    AblateHead,
    DisableExpert,
    ForceExpert,
    HeadTemperature,
    NoPositions,
    ShufflePositions,
    SwapEmbedding)
from .core.trace.model import Model
from .core.trace.trace import Trace
from .io.loader import load_model

__all__ = ["load_model", "compare", "Comparison", "Model", "ModelConfig", "ModelError", "Trace",
           "AblateHead", "HeadTemperature", "NoPositions", "ShufflePositions", "SwapEmbedding", "DisableExpert",
           "ForceExpert"]
__version__ = "0.2.0"
