"""DeepSeek-V2 (`deepseek_v2`: DeepSeek-V2-Lite, DeepSeek-V2, DeepSeek-Coder-V2), as transformers'
modeling_deepseek_v2.py computes it: multi-head latent attention (keys and values rebuilt from a
per-token latent c_kv, a decoupled rotary part of qk_rope_head_dim dims turned as neighbouring
pairs, YaRN with the softmax scale times mscale(factor, mscale_all_dim)²: core/model/mla.py),
RMSNorm before each sub-layer, the first first_k_dense_replace layers a dense SwiGLU and the
others a mixture of experts: softmax over n_routed_experts, the top num_experts_per_tok
(greedy, or group_limited_greedy over n_group groups keeping topk_group), times
routed_scaling_factor, never renormalised, plus n_shared_experts shared experts (one SwiGLU
n_shared_experts · moe_intermediate_size wide) without a gate (core/model/moe.py).

Keys read and transformers' DeepseekV2Config defaults used when absent: vocab_size 102400,
hidden_size 4096, intermediate_size 11008 (dense layers), moe_intermediate_size 1407,
num_hidden_layers 32, num_attention_heads 32, num_key_value_heads (null: as many as the heads;
another number is refused), hidden_act silu, max_position_embeddings 2048, rms_norm_eps 1e-6,
tie_word_embeddings false, rope_theta 10000 and rope_scaling / rope_parameters (yarn's factor,
original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim), attention_bias
false, mlp_bias false, kv_lora_rank 512, q_lora_rank 1536 (null: one q_proj, as V2-Lite),
qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, n_routed_experts 64,
num_experts_per_tok (none: required), n_shared_experts 2, first_k_dense_replace 0,
routed_scaling_factor 1.0, topk_method greedy, n_group and topk_group (group_limited_greedy
only), norm_topk_prob false.

Refused in one line, each naming the key: moe_layer_freq other than 1 and norm_topk_prob true
(transformers ignores both, DeepSeek's own code does not: no single answer), scoring_func other
than softmax, topk_method other than greedy / group_limited_greedy, attention_bias or mlp_bias
true.

GGUF (llama.cpp's `deepseek2`): files as its converter wrote them with attn_kv_b (key_length =
qk_nope + qk_rope, value_length = v_head_dim) are read; the later converter's attn_k_b / attn_v_b
split is refused in one line."""
from __future__ import annotations

import math

import numpy as np

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import IDENTITY, KeyMap, activation, build, display_name, flag, integer, number, prefixed, strip_prefix, tied
from .layer_kinds import with_defaults
from .llama import ACTIVATIONS, decoder_keymap
from .moe_layout import moe_keymap, needs_config
from .gguf_layout import DECODER_BLOCK, decoder_layout, tensor_names, vocab_size
from .rope import rope_fields

MODEL_TYPES = ("deepseek_v2",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=102400, hidden_size=4096, intermediate_size=11008, moe_intermediate_size=1407,
                num_hidden_layers=32, num_attention_heads=32, hidden_act="silu", max_position_embeddings=2048,
                rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0, attention_bias=False,
                mlp_bias=False, kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128,
                qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=64, n_shared_experts=2,
                first_k_dense_replace=0, routed_scaling_factor=1.0, topk_method="greedy",
                norm_topk_prob=False, moe_layer_freq=1, scoring_func="softmax")
PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def detect(names: set[str]) -> bool:
    return any(n.endswith("self_attn.kv_a_proj_with_mqa.weight") for n in names)


def _refuse_ambiguous(cfg: dict, source: str) -> None:
    """Keys transformers ignores where DeepSeek's own code acts on them, and what neither has."""
    if cfg.get("moe_layer_freq", 1) not in (1, None):
        raise ModelError(f"{source}: moe_layer_freq={cfg['moe_layer_freq']!r} is not supported (only 1: "
                         f"transformers ignores it, DeepSeek's own code does not)")
    if flag(cfg, "norm_topk_prob", source, False):
        raise ModelError(f"{source}: norm_topk_prob=true is not supported (transformers ignores it, "
                         f"DeepSeek's own code normalises the gates)")
    if cfg.get("scoring_func", "softmax") not in ("softmax", None):
        raise ModelError(f"{source}: scoring_func={cfg['scoring_func']!r} is not supported (only softmax)")
    for key in ("attention_bias", "mlp_bias"):
        if flag(cfg, key, source, False):
            raise ModelError(f"{source}: {key}=true is not supported for deepseek_v2")
    n_head, n_kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if n_kv is not None and n_kv != n_head:
        raise ModelError(f"{source}: num_key_value_heads={n_kv!r} differs from num_attention_heads="
                         f"{n_head!r}: latent attention rebuilds a key and value for every head")


def _routing(cfg: dict, source: str) -> dict:
    method = cfg.get("topk_method") or "greedy"
    if method == "greedy":
        return {}
    if method != "group_limited_greedy":
        raise ModelError(f"{source}: topk_method={method!r} is not supported (greedy, group_limited_greedy)")
    return dict(n_expert_groups=integer(cfg, "n_group", source), topk_groups=integer(cfg, "topk_group", source))


def _mscale(cfg: dict, fields: dict) -> float:
    """The softmax scale's YaRN factor as transformers' yarn_apply_mscale: mscale(factor,
    mscale_all_dim)² on the scale when the rope is scaled and mscale_all_dim is set."""
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default")) if isinstance(scaling, dict) else "default"
    m_all = scaling.get("mscale_all_dim") if isinstance(scaling, dict) else None
    if kind == "default" or not m_all:
        return 1.0
    factor = fields.get("rope_factor", 1.0)
    return 1.0 if factor <= 1 else 0.1 * float(m_all) * math.log(factor) + 1.0


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(cfg, DEFAULTS)
    _refuse_ambiguous(cfg, source)
    n_layer, n_head = integer(cfg, "num_hidden_layers", source), integer(cfg, "num_attention_heads", source)
    d_nope, d_rope = integer(cfg, "qk_nope_head_dim", source), integer(cfg, "qk_rope_head_dim", source)
    if d_rope % 2:
        raise ModelError(f"{source}: qk_rope_head_dim={d_rope} must be even for rotary positions")
    q_lora = cfg.get("q_lora_rank")
    n_ctx = integer(cfg, "max_position_embeddings", source)
    n_expert, n_dense = integer(cfg, "n_routed_experts", source), cfg.get("first_k_dense_replace") or 0
    if type(n_dense) is not int or n_dense < 0:
        raise ModelError(f"{source}: first_k_dense_replace must be a non-negative integer, got {n_dense!r}")
    is_tied = tied(cfg, default=False)
    fields = dict(
        family="deepseek_v2", name=display_name(cfg), n_vocab=integer(cfg, "vocab_size", source),
        n_ctx=n_ctx, d_model=integer(cfg, "hidden_size", source), n_head=n_head,
        head_dim=d_nope + d_rope, n_layer=n_layer, d_ff=integer(cfg, "intermediate_size", source),
        position="rotary", norm="pre", norm_kind="rms", causal=True, gated_mlp=True,
        activation=activation(cfg, "hidden_act", source, "silu", ACTIVATIONS),
        ln_eps=number(cfg, "rms_norm_eps", source, 1e-6), final_norm=True,
        lm_head=is_tied or "lm_head.weight" in names, tied_head=is_tied,
        qkv_bias=False, o_bias=False, mlp_bias=False,
        kv_lora_rank=integer(cfg, "kv_lora_rank", source),
        q_lora_rank=0 if q_lora is None else integer(cfg, "q_lora_rank", source),
        v_head_dim=integer(cfg, "v_head_dim", source),
        n_expert=n_expert, n_expert_used=integer(cfg, "num_experts_per_tok", source),
        d_expert=integer(cfg, "moe_intermediate_size", source), norm_topk=False,
        dense_layers=tuple(range(min(n_dense, n_layer))),
        d_shared_expert=integer(cfg, "moe_intermediate_size", source) * integer(cfg, "n_shared_experts", source),
        shared_expert_gate=False,
        routed_scale=number(cfg, "routed_scaling_factor", source, 1.0, positive=True),
        **_routing(cfg, source))
    fields.update(rope_fields(cfg, source, d_rope, n_ctx, model_type="deepseek_v2"))
    fields["rotary_dim"] = d_rope               # the rotated tail of each q/k head
    fields["attn_mscale"] = _mscale(cfg, fields)
    return build(source, **fields)


def _attention_keys(config: ModelConfig, i: int) -> KeyMap:
    from .common import TRANSPOSE

    p, core = f"layers.{i}.self_attn.", f"h.{i}.attn."
    names = [("kv_a.w", "kv_a_proj_with_mqa"), ("kv_b.w", "kv_b_proj"), ("o.w", "o_proj")]
    names += ([("q_a.w", "q_a_proj"), ("q_b.w", "q_b_proj")] if config.q_lora_rank else [("q.w", "q_proj")])
    keys: KeyMap = [(core + c, p + h + ".weight", TRANSPOSE) for c, h in names]
    keys.append((core + "kv_a_norm.g", p + "kv_a_layernorm.weight", IDENTITY))
    if config.q_lora_rank:
        keys.append((core + "q_a_norm.g", p + "q_a_layernorm.weight", IDENTITY))
    return keys


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    llama = [entry for entry in decoder_keymap(config) if ".attn." not in entry[0]]
    keys = moe_keymap(llama, config, "mlp.", "gate", "experts.{e}", PROJECTIONS, shared="shared_experts")
    for i in range(config.n_layer):
        keys += _attention_keys(config, i)
    return prefixed(keys, strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise needs_config("DeepSeek-V2")


def _gguf_count(f, key: str) -> int:
    value = f.value(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ModelError(f"{f.path}: GGUF metadata {key} must be a non-negative integer, got {value!r}")
    return int(value)


def _gguf_config(files: list, arch: str) -> dict:
    """config.json fields from llama.cpp's deepseek2 keys, as its converter wrote them before it
    split attn_kv_b (key_length = qk_nope + qk_rope, value_length = v_head_dim); a file with
    attn_k_b / attn_v_b (the later converter's form) is refused."""
    f = files[0]
    names = tensor_names(files)
    if "blk.0.attn_k_b.weight" in names or "blk.0.attn_v_b.weight" in names:
        raise ModelError(f"{f.path}: attn_kv_b split into attn_k_b / attn_v_b (llama.cpp's later deepseek2 "
                         f"converter) is not read yet; a file with attn_kv_b, or the Hugging Face folder, opens")
    gating = f.value(f"{arch}.expert_gating_func", 1)
    if gating != 1:
        raise ModelError(f"{f.path}: {arch}.expert_gating_func={gating!r} is not supported (1, softmax)")
    n_head, d_rope = f.integer(f"{arch}.attention.head_count"), f.integer(f"{arch}.rope.dimension_count")
    cfg = {"model_type": "deepseek_v2", "vocab_size": vocab_size(files, arch),
           "hidden_size": f.integer(f"{arch}.embedding_length"), "num_hidden_layers": f.integer(f"{arch}.block_count"),
           "intermediate_size": f.integer(f"{arch}.feed_forward_length"), "num_attention_heads": n_head,
           "num_key_value_heads": f.integer(f"{arch}.attention.head_count_kv", n_head),
           "rms_norm_eps": f.number(f"{arch}.attention.layer_norm_rms_epsilon"),
           "max_position_embeddings": f.integer(f"{arch}.context_length", 2048),
           "rope_theta": f.number(f"{arch}.rope.freq_base", 10000.0), "tie_word_embeddings": "output.weight" not in names,
           "kv_lora_rank": f.integer(f"{arch}.attention.kv_lora_rank"),
           "q_lora_rank": f.integer(f"{arch}.attention.q_lora_rank") if f"{arch}.attention.q_lora_rank" in f.metadata
           else None,
           "qk_rope_head_dim": d_rope, "qk_nope_head_dim": f.integer(f"{arch}.attention.key_length") - d_rope,
           "v_head_dim": f.integer(f"{arch}.attention.value_length"),
           "first_k_dense_replace": _gguf_count(f, f"{arch}.leading_dense_block_count"),
           "moe_intermediate_size": f.integer(f"{arch}.expert_feed_forward_length"),
           "n_routed_experts": f.integer(f"{arch}.expert_count"),
           "num_experts_per_tok": f.integer(f"{arch}.expert_used_count"),
           "n_shared_experts": f.integer(f"{arch}.expert_shared_count"),
           "routed_scaling_factor": f.number(f"{arch}.expert_weights_scale", 1.0),
           "norm_topk_prob": bool(f.value(f"{arch}.expert_weights_norm", False))}
    kind = f.value(f"{arch}.rope.scaling.type", "none")
    if kind == "yarn":        # llama.cpp keeps 0.1 · mscale_all_dim; DeepSeek's mscale equals it
        m_all = f.number(f"{arch}.rope.scaling.yarn_log_multiplier") / 0.1
        cfg["rope_scaling"] = {"type": "yarn", "factor": f.number(f"{arch}.rope.scaling.factor"),
                               "original_max_position_embeddings":
                                   f.integer(f"{arch}.rope.scaling.original_context_length"),
                               "mscale": m_all, "mscale_all_dim": m_all}
    elif kind not in ("none", None):
        raise ModelError(f"{f.path}: rope scaling {kind!r} is not supported for {arch} (yarn is)")
    return cfg


# llama.cpp's deepseek2: the latent attention's tensors by their own names, the shared experts as
# ffn_*_shexp; the rotary pairs are neighbours in both (no permutation to undo)
GGUF_LAYOUTS = (decoder_layout(
    "deepseek2", _gguf_config, experts=True,
    block={**DECODER_BLOCK, "attn_q_a": "self_attn.q_a_proj", "attn_q_a_norm": "self_attn.q_a_layernorm",
           "attn_q_b": "self_attn.q_b_proj", "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
           "attn_kv_a_norm": "self_attn.kv_a_layernorm", "attn_kv_b": "self_attn.kv_b_proj",
           "ffn_gate_shexp": "mlp.shared_experts.gate_proj", "ffn_up_shexp": "mlp.shared_experts.up_proj",
           "ffn_down_shexp": "mlp.shared_experts.down_proj"}),)
