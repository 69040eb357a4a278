"""SmolLM3 (`smollm3`): the Llama layout (tensor names, SwiGLU, GQA, RMSNorm), with no rotary
on the layers whose no_rope_layers entry is 0 (NoPE: by default every fourth, layers 3, 7, ...):
config nope_layers. Their q and k carry no position at all; only the causal mask orders them.

Keys read and transformers' SmolLM3Config defaults used when absent: vocab_size 128256,
hidden_size 2048, intermediate_size 11008, num_hidden_layers 36, num_attention_heads 16,
num_key_value_heads 4, hidden_act silu, max_position_embeddings 32768, rms_norm_eps 1e-6,
rope_theta 10000 with rope_scaling (or rope_parameters), no_rope_layers from
no_rope_layer_interval 4 (layer i has rope unless (i + 1) % 4 == 0), use_sliding_window false
with sliding_window null (true: layer_types' sliding layers get the window),
attention_bias false, mlp_bias false, tie_word_embeddings true.
A lone SmolLM3 file looks like Llama's: its config.json tells them apart."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from .common import KeyMap, flag, integer, prefixed, strip_prefix
from .layer_kinds import flag_list, sliding_layers, window_fields, with_defaults
from .llama import decoder_config, decoder_keymap

MODEL_TYPES = ("smollm3",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                num_attention_heads=16, num_key_value_heads=4, hidden_act="silu",
                max_position_embeddings=32768, rms_norm_eps=1e-6, attention_bias=False,
                mlp_bias=False, tie_word_embeddings=True, no_rope_layer_interval=4)


def detect(names: set[str]) -> bool:
    return False   # the tensors are Llama's


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(cfg, DEFAULTS)
    if cfg.get("num_key_value_heads") is None:     # null: as many as the query heads
        cfg["num_key_value_heads"] = cfg.get("num_attention_heads")
    n_layer = integer(cfg, "num_hidden_layers", source)
    interval = integer(cfg, "no_rope_layer_interval", source)
    rope = flag_list(cfg, "no_rope_layers", source, n_layer)
    if rope is None:
        rope = [int((i + 1) % interval != 0) for i in range(n_layer)]
    windows = {"sliding_window": 0, "local_layers": ()}
    if flag(cfg, "use_sliding_window", source, False):
        local = sliding_layers(cfg, source, n_layer,
                               ("sliding_attention" if cfg.get("sliding_window") is not None and not rope[i]
                                else "full_attention" for i in range(n_layer)))
        windows = window_fields(cfg, source, local)
    return decoder_config(cfg, source, names, "smollm3",
                          nope_layers=tuple(i for i, has_rope in enumerate(rope) if not has_rope), **windows)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return prefixed(decoder_keymap(config), strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise NotImplementedError   # never detected from tensors alone (see detect)
