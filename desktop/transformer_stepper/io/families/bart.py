"""BART and mBART: learned positions offset by 2, `layernorm_embedding` after the embedding sum,
post-LN blocks (BART) or pre-LN with a final layer_norm per stack (mBART), biases everywhere,
GELU, embeddings × √d_model when scale_embedding, a tied head plus final_logits_bias.
Marian (marian.py) shares this layout with sinusoidal positions and no embedding norm."""
from __future__ import annotations

from ...core.model.errors import ModelError
from ...core.model.seq2seq import Seq2SeqConfig
from .common import (IDENTITY, TRANSPOSE, KeyMap, Transform, activation, build, display_name,
                     divisible, flag, integer, tied)

MODEL_TYPES = ("bart", "mbart")
LAYER_MARKER = "layers."
SEQ2SEQ = True
POSITION_OFFSET = 2            # BartLearnedPositionalEmbedding: rows 0, 1 are never read
ACTIVATIONS = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
               "relu": "relu", "silu": "silu", "swish": "silu"}


class Flat(Transform):
    """final_logits_bias is stored [1, n_vocab]; the core reads [n_vocab]."""

    def checkpoint_shape(self, core_shape):
        return (1, *core_shape)

    def __call__(self, w):
        return w.reshape(-1)


def detect(names: set[str]) -> bool:
    return (any(n.endswith("encoder_attn.k_proj.weight") for n in names)
            and any(n.endswith("layernorm_embedding.weight") for n in names))


def _token_id(cfg: dict, key: str, source: str, default: int) -> int:
    value = cfg.get(key, default)
    if value is None:
        value = default
    if type(value) is not int or value < 0:
        raise ModelError(f"{source}: {key} must be a non-negative integer, got {value!r}")
    return value


def seq2seq_config(cfg: dict, source: str, family: str, pre_ln: bool, position: str,
                   embed_norm: bool, position_offset: int) -> Seq2SeqConfig:
    d_model = integer(cfg, "d_model", source)
    n_ctx = integer(cfg, "max_position_embeddings", source, 1024)
    scale = d_model ** 0.5 if flag(cfg, "scale_embedding", source, False) else 1.0
    act = activation(cfg, "activation_function", source, "gelu", ACTIVATIONS)
    stacks = {}
    for stack in ("encoder", "decoder"):
        n_head = integer(cfg, f"{stack}_attention_heads", source)
        divisible(d_model, n_head, source, "d_model", f"{stack}_attention_heads")
        stacks[stack] = build(
            source, family=family, n_vocab=integer(cfg, "vocab_size", source), n_ctx=n_ctx,
            d_model=d_model, n_head=n_head, n_layer=integer(cfg, f"{stack}_layers", source),
            d_ff=integer(cfg, f"{stack}_ffn_dim", source), position=position,
            position_offset=position_offset, norm="pre" if pre_ln else "post",
            embed_norm=embed_norm, activation=act, ln_eps=1e-5, final_norm=pre_ln,
            embed_scale=scale, causal=stack == "decoder", lm_head=stack == "decoder",
            tied_head=tied(cfg))
    if not tied(cfg):
        raise ModelError(f"{source}: tie_word_embeddings is false: an untied {family} head is not supported")
    pad = _token_id(cfg, "pad_token_id", source, 1)
    return Seq2SeqConfig(
        encoder=stacks["encoder"], decoder=stacks["decoder"], family=family, name=display_name(cfg),
        decoder_start_token_id=_token_id(cfg, "decoder_start_token_id", source, 2),
        eos_token_id=_token_id(cfg, "eos_token_id", source, 2), pad_token_id=pad, logits_bias=True)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> Seq2SeqConfig:
    family = cfg.get("model_type")
    return seq2seq_config(cfg, source, family, pre_ln=family == "mbart", position="learned",
                          embed_norm=True, position_offset=POSITION_OFFSET)


def _prefix(names: set[str]) -> str:
    return "model." if any(n.startswith("model.") for n in names) else ""


def stacks_keymap(config: Seq2SeqConfig, names: set[str]) -> KeyMap:
    """The BART layout's names (Marian's too)."""
    m = _prefix(names)
    wte = next((m + n for n in ("shared.weight", "encoder.embed_tokens.weight") if m + n in names),
               m + "shared.weight")
    keys: KeyMap = [("wte", wte, IDENTITY), ("final_logits_bias", "final_logits_bias", Flat())]
    for stack, stack_config in (("encoder", config.encoder), ("decoder", config.decoder)):
        s = f"{m}{stack}."
        if stack_config.position == "learned" and stack_config.position_offset:
            keys.append((f"{stack}.wpe", s + "embed_positions.weight", IDENTITY))
        if stack_config.embed_norm:
            keys += [(f"{stack}.ln_emb.g", s + "layernorm_embedding.weight", IDENTITY),
                     (f"{stack}.ln_emb.b", s + "layernorm_embedding.bias", IDENTITY)]
        if stack_config.final_norm:
            keys += [(f"{stack}.ln_f.g", s + "layer_norm.weight", IDENTITY),
                     (f"{stack}.ln_f.b", s + "layer_norm.bias", IDENTITY)]
        for i in range(stack_config.n_layer):
            p, core = f"{s}layers.{i}.", f"{stack}.h.{i}."
            parts = [("attn", "self_attn", "ln_1", "self_attn_layer_norm")]
            if stack == "decoder":
                parts.append(("cross", "encoder_attn", "ln_cross", "encoder_attn_layer_norm"))
            for core_attn, ckpt_attn, core_ln, ckpt_ln in parts:
                for name, ckpt in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
                    keys.append((f"{core}{core_attn}.{name}.w", f"{p}{ckpt_attn}.{ckpt}.weight", TRANSPOSE))
                    keys.append((f"{core}{core_attn}.{name}.b", f"{p}{ckpt_attn}.{ckpt}.bias", IDENTITY))
                keys += [(f"{core}{core_ln}.g", f"{p}{ckpt_ln}.weight", IDENTITY),
                         (f"{core}{core_ln}.b", f"{p}{ckpt_ln}.bias", IDENTITY)]
            for name, ckpt in (("fc", "fc1"), ("proj", "fc2")):
                keys.append((f"{core}mlp.{name}.w", f"{p}{ckpt}.weight", TRANSPOSE))
                keys.append((f"{core}mlp.{name}.b", f"{p}{ckpt}.bias", IDENTITY))
            keys += [(f"{core}ln_2.g", f"{p}final_layer_norm.weight", IDENTITY),
                     (f"{core}ln_2.b", f"{p}final_layer_norm.bias", IDENTITY)]
    return keys


def keymap(config: Seq2SeqConfig, names: set[str]) -> KeyMap:
    return stacks_keymap(config, names)


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a BART checkpoint needs its config.json beside it (head counts and the "
                     "norm placement are not in the tensor shapes)")
