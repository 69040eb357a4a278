"""gpt-oss (`gpt_oss`, openai/gpt-oss-20b and -120b): Llama's pre-norm blocks with RMSNorm, GQA and
rotary (YaRN) attention, plus
- attention sinks: each head's learned logit (self_attn.sinks) joins every row's softmax as one
  more column no value is read from (core/model/forward.py sink_softmax);
- biases on q, k, v and o (attention_bias);
- sliding-window layers alternating with full ones (layer_types; by default the even layers
  0, 2, ... slide over sliding_window keys);
- every feed-forward a mixture of experts: the router has a bias; its top num_experts_per_tok
  logits are chosen first, then softmaxed among themselves (transformers' GptOssTopKRouter);
  each expert is the clamped SwiGLU (gate ≤ limit, |up| ≤ limit, (up + 1) · gate·σ(α·gate))
  with biases, stored fused: experts.gate_up_proj [n_expert, d_model, 2·d_expert] with gate
  and up interleaved (gate the even columns), gate_up_proj_bias, down_proj [n_expert,
  d_expert, d_model], down_proj_bias (core/model/moe.py).

Keys read and transformers' GptOssConfig defaults used when absent: vocab_size 201088,
hidden_size 2880, intermediate_size 2880 (one expert's width), num_hidden_layers 36,
num_attention_heads 64, num_key_value_heads 8, head_dim 64, max_position_embeddings 131072,
rms_norm_eps 1e-5, tie_word_embeddings false, rope_theta 150000, rope_scaling / rope_parameters
(absent: yarn, factor 32, beta_fast 32, beta_slow 1, truncate false,
original_max_position_embeddings 4096), sliding_window 128 (null: no window), layer_types
(sliding on even layers), attention_bias true, num_local_experts 128 (num_experts),
num_experts_per_tok 4, swiglu_alpha 1.702, swiglu_limit 7.0. (hidden_act is not read: the
experts' activation is the clamped SwiGLU whatever it says; router_aux_loss_coef and
output_router_logits act in training only.)

The released checkpoints store the experts in MXFP4 (gate_up_proj_blocks / _scales): such a
folder is refused naming them; its GGUF (llama.cpp keeps the MXFP4 blocks) opens."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import IDENTITY, TRANSPOSE, KeyMap, flag, integer, number, prefixed, strip_prefix
from .gguf_layout import (DECODER_BLOCK, decoder_config as gguf_decoder_config, decoder_layout, expert_config,
                          tensor_names)
from .layer_kinds import sliding_layers, window_fields, with_defaults
from .llama import decoder_config, decoder_keymap
from .moe_layout import detect_experts, expert_fields, needs_config, renamed
from ..keymaps import ExpertPart

MODEL_TYPES = ("gpt_oss",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36,
                num_attention_heads=64, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=150000.0, attention_bias=True,
                num_local_experts=128, num_experts_per_tok=4, swiglu_alpha=1.702, swiglu_limit=7.0)
DEFAULT_WINDOW = 128        # GptOssConfig's sliding_window (an explicit null turns it off)
DEFAULT_ROPE = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}
EXPERTS = "mlp.experts."


def detect(names: set[str]) -> bool:
    return detect_experts(names, "mlp.router", ".mlp.experts.") and \
        any(n.endswith("self_attn.sinks") for n in names)


def _rope(cfg: dict) -> dict:
    """transformers' GptOssConfig: no rope_parameters (nor rope_scaling) means its YaRN."""
    if cfg.get("rope_scaling") is None and cfg.get("rope_parameters") is None:
        return {**cfg, "rope_scaling": dict(DEFAULT_ROPE)}
    return cfg


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    window = cfg.get("sliding_window", DEFAULT_WINDOW)
    cfg = _rope(with_defaults(renamed(cfg, "num_experts", "num_local_experts", source), DEFAULTS))
    if any(n.endswith("_blocks") and EXPERTS in n for n in names):
        raise ModelError(f"{source}: the experts are stored in MXFP4 (mlp.experts.*_blocks / _scales), "
                         f"which is read from GGUF only; open the model's GGUF file (llama.cpp keeps "
                         f"those blocks as they are)")
    n_layer = integer(cfg, "num_hidden_layers", source)
    local = sliding_layers(cfg, source, n_layer,
                           ("sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layer)))
    bias = flag(cfg, "attention_bias", source, True)
    fields = expert_fields(cfg, source, "num_local_experts", "intermediate_size", norm_topk=True)
    return decoder_config(cfg, source, names, "gpt_oss", qkv_bias=bias, o_bias=bias, mlp_bias=True,
                          router_bias=True, router_order="topk_softmax", clamped_swiglu=True,
                          swiglu_alpha=number(cfg, "swiglu_alpha", source, 1.702, positive=True),
                          swiglu_limit=number(cfg, "swiglu_limit", source, 7.0, positive=True),
                          attn_sinks=True, activation="silu",
                          **window_fields({"sliding_window": window}, source, local), **fields)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    prefix = strip_prefix(names, ("model.",))
    keys = [entry for entry in decoder_keymap(config) if ".mlp." not in entry[0]]
    for i in range(config.n_layer):
        p, core = f"layers.{i}.", f"h.{i}."
        sinks = p + "self_attn.sinks"
        keys.append((core + "attn.sinks", sinks if prefix + sinks in names else sinks + ".weight", IDENTITY))
        keys += [(core + "moe.router.w", p + "mlp.router.weight", TRANSPOSE),
                 (core + "moe.router.b", p + "mlp.router.bias", IDENTITY)]
        fused = prefix + p + EXPERTS + "gate_up_proj" in names
        for e in range(config.n_expert):
            keys += (_fused_expert if fused else _stored_expert)(config, p + EXPERTS, f"{core}moe.expert.{e}.", e)
    return prefixed(keys, prefix, ("lm_head.",))


def _fused_expert(config: ModelConfig, p: str, core: str, e: int) -> KeyMap:
    # Hugging Face's fused tensors, [in, out] per expert: gate the even columns of gate_up
    n = config.n_expert
    return [(core + "gate.w", p + "gate_up_proj", ExpertPart(e, n, 0, 2)),
            (core + "up.w", p + "gate_up_proj", ExpertPart(e, n, 1, 2)),
            (core + "gate.b", p + "gate_up_proj_bias", ExpertPart(e, n, 0, 2)),
            (core + "up.b", p + "gate_up_proj_bias", ExpertPart(e, n, 1, 2)),
            (core + "proj.w", p + "down_proj", ExpertPart(e, n)),
            (core + "proj.b", p + "down_proj_bias", ExpertPart(e, n))]


def _stored_expert(config: ModelConfig, p: str, core: str, e: int) -> KeyMap:
    # one name per expert, [out, in] (a GGUF's 3-D tensors, split as llama.cpp's converter does)
    keys: KeyMap = []
    for name, projection in (("gate", "gate_proj"), ("up", "up_proj"), ("proj", "down_proj")):
        keys += [(core + name + ".w", f"{p}{e}.{projection}.weight", TRANSPOSE),
                 (core + name + ".b", f"{p}{e}.{projection}.bias", IDENTITY)]
    return keys


def infer_hf_config(shape, names: set[str]) -> dict:
    raise needs_config("gpt-oss")


def _gguf_config(files: list, arch: str) -> dict:
    """llama.cpp's gpt-oss metadata: an expert's width in expert_feed_forward_length, the window
    in attention.sliding_window (the even layers', as llama.cpp's swa pattern 2), YaRN without
    truncation as the released config (llama.cpp keeps its defaults for the betas)."""
    f = files[0]
    cfg = gguf_decoder_config(files, arch, head_dim=True)
    rope = cfg.get("rope_scaling")
    if rope is None or rope.get("rope_type") != "yarn":
        raise ModelError(f"{f.path}: a gpt-oss GGUF needs {arch}.rope.scaling.type yarn, got {rope!r}")
    return {**cfg, **expert_config(files, arch, "gpt_oss", "num_local_experts", True),
            "intermediate_size": f.integer(f"{arch}.expert_feed_forward_length", cfg["intermediate_size"]),
            "sliding_window": f.integer(f"{arch}.attention.sliding_window"),
            "rope_scaling": {**rope, "truncate": False},
            "attention_bias": "blk.0.attn_q.bias" in tensor_names(files)}


GGUF_LAYOUTS = (decoder_layout(
    "gpt-oss", _gguf_config, experts=True,
    block={**DECODER_BLOCK, "post_attention_norm": "post_attention_layernorm", "attn_sinks": "self_attn.sinks",
           "ffn_gate_inp": "mlp.router"},
    expert_names={"ffn_gate_exps": "mlp.experts.{e}.gate_proj", "ffn_up_exps": "mlp.experts.{e}.up_proj",
                  "ffn_down_exps": "mlp.experts.{e}.down_proj"}),)
