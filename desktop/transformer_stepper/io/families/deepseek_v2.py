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
true. llama.cpp's `deepseek2` GGUF files are refused (io/gguf: an architecture with experts not
read)."""
from __future__ import annotations

import math

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import IDENTITY, KeyMap, activation, build, display_name, flag, integer, number, prefixed, strip_prefix, tied
from .layer_kinds import with_defaults
from .llama import ACTIVATIONS, decoder_keymap
from .moe_layout import moe_keymap, needs_config
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
