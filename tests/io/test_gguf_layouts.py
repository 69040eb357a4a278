"""Each family module declares how llama.cpp stores its models (GGUF_LAYOUTS); the GGUF loader
finds a file's layout through the registry and holds no per-architecture branch: a layout
registered for a new architecture name opens a file of that name, an architecture no family
declares is refused in one line naming the file and the architecture."""
from types import ModuleType

import numpy as np
import pytest

from tests.io.test_gguf_files import refused, write
from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io import families
from transformer_stepper.io.families import (deepseek_v2, gemma, gpt2, gpt_oss, llama, mixtral, olmoe, qwen2_moe,
                                             qwen3_moe)
from transformer_stepper.io.families.gguf_layout import UNPERMUTE_QK, GGUFLayout, decoder_layout
from transformer_stepper.io.gguf.model import MinusOne, Transposed, Unpermute

# (general.architecture, declared experts) -> the family module that must own it
OWNERS = {("gpt2", 0): gpt2, ("llama", 0): llama, ("qwen2", 0): llama, ("qwen3", 0): llama,
          ("gemma", 0): gemma, ("llama", 8): mixtral, ("qwen3moe", 128): qwen3_moe,
          ("qwen2moe", 60): qwen2_moe, ("olmoe", 64): olmoe, ("gpt-oss", 32): gpt_oss,
          ("deepseek2", 64): deepseek_v2}


@pytest.mark.parametrize("arch, experts", list(OWNERS))
def test_a_family_modules_gguf_layout_is_found_through_the_registry(arch, experts):
    family, layout = families.gguf_layout_of(arch, experts, "m.gguf")
    module = OWNERS[(arch, experts)]
    assert family.name == module.__name__.rpartition(".")[2]
    assert layout in module.GGUF_LAYOUTS and layout.architecture == arch
    assert layout.experts == bool(experts)


def test_the_registry_holds_exactly_the_families_declarations():
    declared = [(layout.architecture, layout.experts) for f in families.FAMILIES for layout in f.gguf_layouts]
    assert len(declared) == len(set(declared)) == len(families.GGUF_LAYOUTS)
    assert set(declared) == {(arch, bool(n)) for arch, n in OWNERS}


def test_the_fix_ups_are_the_families():
    assert llama.GGUF_LAYOUTS[0].fix("attn_q", "bias") == "unpermute_heads"
    assert mixtral.GGUF_LAYOUTS[0].fix("attn_k", "weight") == "unpermute_kv_heads"
    assert qwen3_moe.GGUF_LAYOUTS[0].fix("attn_q", "weight") is None      # stored as HF has it
    gemma_layout = gemma.GGUF_LAYOUTS[0]
    assert gemma_layout.fix("output_norm", "weight") == "minus_one" and gemma_layout.sentencepiece == "gemma"
    assert gpt2.GGUF_LAYOUTS[0].fix("attn_qkv", "weight") == "transposed"
    assert gpt2.GGUF_LAYOUTS[0].fix("attn_qkv", "bias") is None and gpt2.GGUF_LAYOUTS[0].separate_head


def test_an_unknown_architecture_is_refused_in_one_line_naming_the_file_and_it(tmp_path):
    path = write(tmp_path / "x.gguf", arch="mamba")
    message = refused(path)                    # one line, starting with the file's path
    assert "GGUF architecture 'mamba' is not supported (supported: " in message
    for arch, experts in families.GGUF_LAYOUTS:
        assert arch in message
    with pytest.raises(ModelError, match=r"^m.gguf: GGUF architecture 'gemma' with 4 experts \(a mixture"):
        families.gguf_layout_of("gemma", 4, "m.gguf")


def test_a_mixture_of_experts_architecture_without_experts_names_the_missing_key(tmp_path):
    message = refused(write(tmp_path / "m.gguf", arch="qwen3moe"))
    assert message.endswith("GGUF metadata has no 'qwen3moe.expert_count'")


def test_a_layout_registered_for_a_new_name_opens_its_files(tmp_path, monkeypatch):
    """The loader follows the registry alone: Llama's layout under another architecture name
    opens that file with the same numbers as the llama file (the q/k unpermute included)."""
    def config(files, arch):
        return {**llama.gguf_llama_config(files, arch), "model_type": "llama"}
    renamed = decoder_layout("llamalike", config, fixes=UNPERMUTE_QK)
    llama_family = families.by_model_type("llama", "test")
    monkeypatch.setitem(families.GGUF_LAYOUTS, ("llamalike", False), (llama_family, renamed))
    reference = load_model(write(tmp_path / "llama.gguf"))
    model = load_model(write(tmp_path / "like.gguf", arch="llamalike"))
    assert isinstance(model.params.ckpt.fix_of("model.layers.0.self_attn.q_proj.weight"), Unpermute)
    np.testing.assert_array_equal(model.trace("ab a").logits, reference.trace("ab a").logits)


def test_a_family_declaring_a_taken_architecture_or_a_foreign_layout_is_named():
    def module(name, layouts):
        m = ModuleType(f"transformer_stepper.io.families.{name}")
        for attr in ("MODEL_TYPES", "config_from_hf", "keymap", "detect", "infer_hf_config", "LAYER_MARKER"):
            setattr(m, attr, getattr(llama, attr))
        m.GGUF_LAYOUTS = layouts
        return families.Family.of(m)

    twin = module("twin", (decoder_layout("gemma", llama.gguf_llama_config),))
    with pytest.raises(TypeError, match=r"io/families/gemma.py: GGUF architecture 'gemma' without experts is "
                                        r"already io/families/twin.py's"):
        families._gguf_registry((twin, families.by_model_type("gemma", "test")))
    with pytest.raises(TypeError, match=r"io/families/odd.py: GGUF_LAYOUTS must be a tuple of GGUFLayout"):
        module("odd", ({"architecture": "odd"},))
    with pytest.raises(TypeError, match=r"GGUF layout 'odd': unknown fix-up 'negate'"):
        GGUFLayout("odd", llama.gguf_llama_config, {}, {}, "h.{}.", "wte.weight", fixes={"attn_q": "negate"})


def test_the_fix_objects_follow_the_declared_names(tmp_path):
    """The fix-up a layout names is the one the checkpoint applies."""
    from transformer_stepper.io.gguf.model import map_tensors, open_files

    path = write(tmp_path / "g.gguf", arch="gemma")
    files = open_files(path)
    where = map_tensors(files, gemma.GGUF_LAYOUTS[0], 2, 2)
    assert isinstance(where["model.norm.weight"][2], MinusOne)
    assert not isinstance(where["model.layers.0.self_attn.q_proj.weight"][2], (MinusOne, Unpermute))
    where = map_tensors(files, gpt2.GGUF_LAYOUTS[0], 2, 2)
    assert isinstance(where["h.0.mlp.c_fc.weight"][2], Transposed)
    assert not isinstance(where["h.0.ln_1.weight"][2], Transposed)
