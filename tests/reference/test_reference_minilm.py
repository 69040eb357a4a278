"""The real all-MiniLM-L6-v2, traced by the app, against Hugging Face's outputs committed in
tests/fixtures/hf_outputs/minilm_{fp32,fp16,bf16}.npz. The fp16/bf16 files are written here
from the fp32 weights; HF's reference ran the same rounded weights in fp32."""
from __future__ import annotations

import shutil

import pytest
from safetensors.numpy import load_file

from reference_helpers import HF_OUTPUTS, assert_trace_matches, load_reference, reference_texts, write_safetensors
from transformer_stepper import load_model

pytestmark = [pytest.mark.reference, pytest.mark.minilm]

SAFETENSORS_DTYPE = {"fp16": "F16", "bf16": "BF16"}


@pytest.fixture(scope="module")
def minilm_folders(minilm_dir, tmp_path_factory):
    """fp32: the real folder; fp16/bf16: the same weights rewritten, beside the same
    config.json and tokenizer.json."""
    weights = load_file(str(minilm_dir / "model.safetensors"))
    folders = {"fp32": minilm_dir}
    for dtype, st_dtype in SAFETENSORS_DTYPE.items():
        folder = tmp_path_factory.mktemp(f"minilm_{dtype}")
        write_safetensors(folder / "model.safetensors", weights, st_dtype)
        for name in ("config.json", "tokenizer.json"):
            shutil.copy(minilm_dir / name, folder / name)
        folders[dtype] = folder
    return folders


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_minilm_matches_hugging_face(dtype, minilm_folders):
    reference = load_reference(HF_OUTPUTS / f"minilm_{dtype}.npz")
    model = load_model(minilm_folders[dtype])
    assert (model.config.n_layer, model.config.n_head, model.config.d_model) == (6, 12, 384)
    for t, text in enumerate(reference_texts(reference)):
        assert_trace_matches(model.trace(text), reference, t, f"MiniLM {dtype} text {t} {text!r}")


def test_rounded_files_hold_rounded_weights(minilm_folders):
    """The fp16/bf16 files really changed the weights (else the tests above prove nothing)."""
    exact = load_model(minilm_folders["fp32"]).params["h.0.attn.q.w"]
    for dtype in ("fp16", "bf16"):
        rounded = load_model(minilm_folders[dtype]).params["h.0.attn.q.w"]
        assert rounded.shape == exact.shape
        assert 0 < abs(rounded - exact).max() < (1e-3 if dtype == "fp16" else 1e-2)
