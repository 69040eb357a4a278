"""Helpers for the reference tier: committed HF outputs, comparisons, a safetensors writer.

No torch here: the committed tier must run on the app's own dependencies."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

ATOL = 1e-4
HF_OUTPUTS = Path(__file__).resolve().parents[1] / "fixtures" / "hf_outputs"
TINY_FIXTURES = ("bert_tiny", "bert_tiny_mlm", "bert_tiny_gamma_beta", "gpt2_tiny_lm", "gpt2_tiny")


def load_reference(path: Path) -> dict[str, np.ndarray]:
    """An npz written by tests/make_fixtures.py, fully read (no pickle)."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def reference_texts(reference: dict[str, np.ndarray]) -> list[str]:
    count = sum(1 for name in reference if name.startswith("text_"))
    assert count, "reference file holds no texts"
    return [str(reference[f"text_{t}"]) for t in range(count)]


def assert_trace_matches(trace, reference: dict[str, np.ndarray], t: int, label: str,
                         atol: float = ATOL) -> None:
    """input_ids identical; hidden_states, attentions (and logits) within atol of HF's."""
    np.testing.assert_array_equal(trace.input_ids, reference[f"input_ids_{t}"],
                                  err_msg=f"{label}: input_ids differ from HF's")
    pairs = [("hidden_states", trace.hidden_states), ("attentions", trace.attentions)]
    if f"logits_{t}" in reference:
        assert trace.logits is not None, f"{label}: HF has an LM head, the loaded model has none"
        pairs.append(("logits", trace.logits))
    else:
        assert trace.logits is None, f"{label}: HF has no LM head, the loaded model has one"
    for name, actual in pairs:
        expected = reference[f"{name}_{t}"]
        assert actual.shape == expected.shape, f"{label}: {name} shape {actual.shape} != {expected.shape}"
        assert actual.dtype == np.float32, f"{label}: {name} is {actual.dtype}"
        np.testing.assert_allclose(actual, expected, rtol=0, atol=atol,
                                   err_msg=f"{label}: {name} differs from HF's")


# ------------------------------------------------------------------------- safetensors writer
def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """The top 16 bits of each float32, rounded to nearest even as torch's .bfloat16() does
    (plain truncation would give different weights from the ones the HF reference used)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


_ST_DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64",
              np.dtype("int32"): "I32", np.dtype("bool"): "BOOL", np.dtype("uint8"): "U8"}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], float_dtype: str = "F32") -> None:
    """Write `tensors` with every float tensor stored as float_dtype (F32, F16 or BF16).

    The header is built by hand because safetensors.numpy cannot write bfloat16."""
    header: dict = {"__metadata__": {"format": "pt"}}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        value = np.asarray(tensors[name])
        if value.dtype.kind == "f" and float_dtype == "BF16":
            dtype, data = "BF16", float32_to_bf16_bits(value).astype("<u2").tobytes()
        elif value.dtype.kind == "f":
            dtype = float_dtype
            data = value.astype({"F32": "<f4", "F16": "<f2"}[float_dtype]).tobytes()
        else:
            dtype, data = _ST_DTYPES[value.dtype], np.ascontiguousarray(value).tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)  # the format aligns the data to 8 bytes
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(header_bytes)))
        handle.write(header_bytes)
        for data in chunks:
            handle.write(data)
