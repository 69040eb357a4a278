"""T5 / Flan-T5 (v1.0 and v1.1): RMSNorm without mean ("T5LayerNorm"), no biases, pre-norm,
relative position bias (per-head scalars by bucket, from the first layer, shared by all),
ReLU (v1.0) or gated-GELU (v1.1, Flan-T5) feed-forward, scores not scaled by 1/√d (T5 folds
it into its initialisation), v1.0's head reading h · d_model^-0.5, one shared vocabulary."""
from __future__ import annotations

from ...core.model.seq2seq import Seq2SeqConfig
from ...core.model.errors import ModelError
from .common import IDENTITY, TRANSPOSE, KeyMap, build, display_name, flag, integer, number, tied

MODEL_TYPES = ("t5",)
LAYER_MARKER = "block."
SEQ2SEQ = True
ACTIVATIONS = {"relu": "relu", "gelu": "gelu_tanh", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh"}


def detect(names: set[str]) -> bool:
    return any(n.endswith("layer.1.EncDecAttention.q.weight") for n in names)


def _feed_forward(cfg: dict, source: str) -> tuple[str, bool]:
    proj = cfg.get("feed_forward_proj", "relu")
    gated = isinstance(proj, str) and proj.startswith("gated-")
    name = proj[len("gated-"):] if gated else proj
    if name not in ACTIVATIONS:
        raise ModelError(f"{source}: unsupported feed_forward_proj {proj!r} "
                         f"(supported: relu, gated-gelu, gated-relu)")
    if name == "gelu" and not gated:
        raise ModelError(f"{source}: feed_forward_proj 'gelu' without a gate is not a T5 variant")
    return ACTIVATIONS[name], gated


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> Seq2SeqConfig:
    act, gated = _feed_forward(cfg, source)
    n_head, d_model = integer(cfg, "num_heads", source), integer(cfg, "d_model", source)
    n_layer = integer(cfg, "num_layers", source)
    stack = dict(family="t5", n_vocab=integer(cfg, "vocab_size", source),
                 n_ctx=integer(cfg, "n_positions", source, 512), d_model=d_model, n_head=n_head,
                 head_dim=integer(cfg, "d_kv", source), d_ff=integer(cfg, "d_ff", source),
                 position="none", norm="pre", norm_kind="rms", activation=act, gated_mlp=gated,
                 ln_eps=number(cfg, "layer_norm_epsilon", source, 1e-6), final_norm=True,
                 qkv_bias=False, o_bias=False, mlp_bias=False)
    encoder = build(source, n_layer=n_layer, **stack)
    # v1.1 / Flan-T5 store their own lm_head.weight; a file without it reads the shared table
    # (transformers 5 saves T5 so). The d_model^-0.5 scaling is v1.0's: transformers 5 keeps
    # it as scale_decoder_outputs, older configs as tie_word_embeddings (false in v1.1)
    untied = any(n == "lm_head.weight" or n.endswith(".lm_head.weight") for n in names)
    scale = cfg.get("scale_decoder_outputs", tied(cfg))
    if type(scale) is not bool:
        raise ModelError(f"{source}: scale_decoder_outputs must be true or false, got {scale!r}")
    decoder = build(source, n_layer=integer(cfg, "num_decoder_layers", source, n_layer), causal=True,
                    lm_head=True, tied_head=not untied, **stack)
    if not flag(cfg, "is_encoder_decoder", source, True):
        raise ModelError(f"{source}: is_encoder_decoder is false (an encoder-only T5 is not supported)")
    return Seq2SeqConfig(
        encoder=encoder, decoder=decoder, family="t5", name=display_name(cfg),
        decoder_start_token_id=integer_or_zero(cfg, "decoder_start_token_id", source),
        eos_token_id=integer(cfg, "eos_token_id", source, 1),
        pad_token_id=integer_or_zero(cfg, "pad_token_id", source), scale_scores=False,
        relative_buckets=integer(cfg, "relative_attention_num_buckets", source, 32),
        relative_max_distance=integer(cfg, "relative_attention_max_distance", source, 128),
        head_scale=d_model ** -0.5 if scale else 1.0)


def integer_or_zero(cfg: dict, key: str, source: str) -> int:
    value = cfg.get(key, 0)
    if type(value) is not int or value < 0:
        raise ModelError(f"{source}: {key} must be a non-negative integer, got {value!r}")
    return value


def keymap(config: Seq2SeqConfig, names: set[str]) -> KeyMap:
    wte = next((n for n in ("shared.weight", "encoder.embed_tokens.weight") if n in names), "shared.weight")
    keys: KeyMap = [("wte", wte, IDENTITY),
                    ("encoder.ln_f.g", "encoder.final_layer_norm.weight", IDENTITY),
                    ("decoder.ln_f.g", "decoder.final_layer_norm.weight", IDENTITY),
                    ("encoder.rel_bias", "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", IDENTITY),
                    ("decoder.rel_bias", "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", IDENTITY)]
    if not config.decoder.tied_head:
        keys.append(("lm_head.w", "lm_head.weight", IDENTITY))
    for stack, stack_config in (("encoder", config.encoder), ("decoder", config.decoder)):
        ff = 2 if stack == "decoder" else 1
        for i in range(stack_config.n_layer):
            p, core = f"{stack}.block.{i}.layer.", f"{stack}.h.{i}."
            attentions = [("attn", "0.SelfAttention")] + ([("cross", "1.EncDecAttention")] if ff == 2 else [])
            for core_attn, ckpt_attn in attentions:
                for name in "qkvo":
                    keys.append((f"{core}{core_attn}.{name}.w", f"{p}{ckpt_attn}.{name}.weight", TRANSPOSE))
            keys.append((core + "ln_1.g", p + "0.layer_norm.weight", IDENTITY))
            if ff == 2:
                keys.append((core + "ln_cross.g", p + "1.layer_norm.weight", IDENTITY))
            keys.append((core + "ln_2.g", f"{p}{ff}.layer_norm.weight", IDENTITY))
            mlp = (("gate", "wi_0"), ("up", "wi_1")) if stack_config.gated_mlp else (("fc", "wi"),)
            for core_name, ckpt_name in mlp + (("proj", "wo"),):
                keys.append((f"{core}mlp.{core_name}.w", f"{p}{ff}.DenseReluDense.{ckpt_name}.weight", TRANSPOSE))
    return keys


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a T5 checkpoint needs its config.json beside it (the head count, d_kv and "
                     "the feed-forward kind are not in the tensor shapes)")
