"""ggml's block quant types, one class per type registered under its name (as gguf-py registers
one class per quant type): a block's byte layout decoded into the stored integer codes, the
block's scale(s) and min(s), and the float32 weights they give. Each type computes its weights
with the same float32 operations, in the same order, as gguf-py's numpy dequantizer, so the two
are equal bit for bit (tests/core/test_quant_types.py). numpy only; the plain reference that a
compiled kernel of a type must equal.

    from transformer_stepper.core.model.quant_types import quant_type
    decoded = quant_type("Q5_K").decode(blocks)      # blocks: [n, type_size] uint8
"""
from .base import QUANT_TYPES, Decoded, QuantType, quant_type
from . import small_blocks, k_quants  # noqa: F401,E402  (importing them registers their types)

__all__ = ["QUANT_TYPES", "Decoded", "QuantType", "quant_type"]
