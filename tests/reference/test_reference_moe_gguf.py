"""Mixture-of-experts GGUF files (tests/make_moe_gguf_fixtures.py): llama.cpp's 3-D expert
tensors read one expert at a time; the F32 files equal the Hugging Face fixtures' references
(the same weights), the Q8_0 file equals transformers run with its dequantized weights (that
a pass reads only the experts it routes to, from their blocks: tests/io/test_gguf_moe_compact.py);
a GGUF declaring experts of an unsupported
architecture is refused saying so."""
from __future__ import annotations

import numpy as np
import pytest

from reference_helpers import ATOL, HF_OUTPUTS, load_reference
from test_reference_generation import prompt_trace
from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError

pytestmark = pytest.mark.reference


@pytest.mark.parametrize("name", ["qwen3_moe_tiny.F32", "mixtral_tiny.F32", "qwen2_moe_tiny.F32", "olmoe_tiny.F32",
                                  "qwen3_moe_tiny.Q8_0", "gpt_oss_tiny.F32", "gpt_oss_tiny.MXFP4",
                                  "deepseek_v2_tiny.F32"])
def test_moe_gguf_equals_hugging_face(name, fixtures_dir):
    fixture, scheme = name.split(".")
    model = load_model(fixtures_dir / "gguf_moe" / f"{name}.gguf")
    hf = load_model(fixtures_dir / fixture)
    assert (model.config.n_expert, model.config.n_expert_used, model.config.norm_topk,
            model.config.dense_layers, model.config.d_expert_ff) == \
        (hf.config.n_expert, hf.config.n_expert_used, hf.config.norm_topk, hf.config.dense_layers,
         hf.config.d_expert_ff)
    reference = load_reference(HF_OUTPUTS / f"{fixture}.npz") if scheme == "F32" else \
        load_reference(fixtures_dir / "gguf_moe" / f"{name}.npz")
    moe_layers = [i for i in range(model.config.n_layer) if model.config.is_moe_layer(i)]
    for t in range(3):
        trace = prompt_trace(model, reference[f"input_ids_{t}"])
        np.testing.assert_allclose(trace.hidden_states, reference[f"hidden_states_{t}"], atol=ATOL, rtol=0)
        np.testing.assert_allclose(trace.logits, reference[f"logits_{t}"], atol=ATOL, rtol=0)
        for position, layer in enumerate(moe_layers):
            np.testing.assert_array_equal(trace.layer("expert_ids", layer), reference[f"expert_ids_{t}"][position])


def test_experts_of_an_unsupported_architecture_are_refused(tmp_path):
    import gguf

    path = tmp_path / "x.gguf"
    writer = gguf.GGUFWriter(str(path), "dbrx")
    writer.add_expert_count(16)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match=r"x.gguf: GGUF architecture 'dbrx' with 16 experts \(a mixture of "
                                         r"experts\) is not supported \(supported: .*deepseek2") as caught:
        load_model(path)
    assert "\n" not in str(caught.value)


def test_a_deepseek2_gguf_reads_as_its_hugging_face_config(fixtures_dir):
    """llama.cpp's deepseek2 keys give the folder's config: latent widths, the rotary tail, YaRN's
    mscale² on the scores (from yarn_log_multiplier), the dense first layer, the shared experts."""
    model = load_model(fixtures_dir / "gguf_moe" / "deepseek_v2_tiny.F32.gguf")
    hf = load_model(fixtures_dir / "deepseek_v2_tiny")
    fields = ("kv_lora_rank", "q_lora_rank", "d_head", "d_v", "d_rotary", "rope_scaling", "rope_factor",
              "rope_original_n_ctx", "rope_attention_factor", "dense_layers", "d_shared_expert",
              "shared_expert_gate", "routed_scale", "n_expert_groups")
    assert {f: getattr(model.config, f) for f in fields} == {f: getattr(hf.config, f) for f in fields}
    # (the file keeps 0.1 · mscale_all_dim as a float32)
    assert model.config.attn_mscale == pytest.approx(hf.config.attn_mscale, rel=1e-7)


def test_a_deepseek2_gguf_with_split_kv_b_is_refused_in_one_line(tmp_path):
    import gguf

    path = tmp_path / "split.gguf"
    writer = gguf.GGUFWriter(str(path), "deepseek2")
    writer.add_expert_count(4)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.add_tensor("blk.0.attn_k_b.weight", np.zeros((2, 4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match=r"split.gguf: attn_kv_b split into attn_k_b / attn_v_b") as caught:
        load_model(path)
    assert "\n" not in str(caught.value)
