"""OLMoE (`olmoe`, OLMoE-1B-7B-0924): Llama's pre-norm blocks and rotary attention with RMSNorm
of the whole q and k projections (q_norm [n_head·d_head], k_norm [n_kv_head·d_head]) before
the heads are split, as OLMo 2; every feed-forward a sparse mixture of many small experts
(64, top 8): softmax over num_experts, the top num_experts_per_tok, divided by their sum only
when norm_topk_prob (core/model/moe.py).

Keys read and transformers' OlmoeConfig defaults used when absent: vocab_size 50304,
hidden_size 2048, intermediate_size 2048 (one expert's width), num_hidden_layers 16,
num_attention_heads 16, num_key_value_heads = num_attention_heads, hidden_act silu,
max_position_embeddings 4096, rms_norm_eps 1e-5, tie_word_embeddings false, rope_theta 10000
(rope_parameters / rope_scaling), attention_bias false, clip_qkv null (a number is refused: the
clamp is not computed), num_experts 64, num_experts_per_tok 8, norm_topk_prob false."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import KeyMap, prefixed, strip_prefix
from .layer_kinds import with_defaults
from .gguf_layout import decoder_config as gguf_decoder_config, decoder_layout, expert_config
from .llama import decoder_config, decoder_keymap
from .moe_layout import renamed, detect_experts, expert_fields, moe_keymap, needs_config
from .qwen3_moe import PROJECTIONS

MODEL_TYPES = ("olmoe",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=50304, hidden_size=2048, intermediate_size=2048, num_hidden_layers=16,
                num_attention_heads=16, hidden_act="silu", max_position_embeddings=4096,
                rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0, attention_bias=False,
                clip_qkv=None, num_experts=64, num_experts_per_tok=8, norm_topk_prob=False)


def detect(names: set[str]) -> bool:
    # the routed layout with q/k norms over the whole projection and no shared expert: told from
    # Qwen3-MoE by the norm's width, which a name does not show (qwen3_moe.detect comes first and
    # needs config.json anyway)
    return False


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(renamed(cfg, "num_local_experts", "num_experts", source), DEFAULTS)
    if cfg.get("num_key_value_heads") is None:     # null: as many as the query heads
        cfg["num_key_value_heads"] = cfg.get("num_attention_heads")
    if cfg.get("clip_qkv") is not None:
        raise ModelError(f"{source}: clip_qkv={cfg['clip_qkv']!r} (q, k, v clamped) is not supported")
    fields = expert_fields(cfg, source, "num_experts", "intermediate_size")
    return decoder_config(cfg, source, names, "olmoe", qk_norm=True,
                          qk_norm_over="projection", mlp_bias=False, **fields).replace(family="olmoe")


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = moe_keymap(decoder_keymap(config), config, "mlp.", "gate", "experts.{e}", PROJECTIONS)
    return prefixed(keys, strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise needs_config("OLMoE")


def _gguf_config(files: list, arch: str) -> dict:
    f = files[0]
    return {**gguf_decoder_config(files, arch), **expert_config(files, arch, "olmoe", "num_experts", False),
            # an expert is intermediate_size wide
            "intermediate_size": f.integer(f"{arch}.expert_feed_forward_length",
                                           f.integer(f"{arch}.feed_forward_length")),
            "clip_qkv": None}


GGUF_LAYOUTS = (decoder_layout("olmoe", _gguf_config, experts=True),)
