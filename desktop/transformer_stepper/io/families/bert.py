"""BERT (bert-base, all-MiniLM ...): word + position + token-type embeddings -> LayerNorm,
post-LN blocks, exact GELU; optional masked-LM head (cls.predictions.*, decoder tied to wte)."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import (ASSUMED_D_HEAD, IDENTITY, TRANSPOSE, KeyMap, activation, build, count_layers, display_name,
                     divisible, integer, number, prefixed, strip_prefix, tied)

MODEL_TYPES = ("bert",)
LAYER_MARKER = "encoder.layer."
ACTIVATIONS = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}


def detect(names: set[str]) -> bool:
    return any(n.endswith("attention.self.query.weight") for n in names) and \
        not any(n.startswith("roberta.") for n in names)


def encoder_config(cfg: dict, source: str, family: str, has_mlm_head: bool,
                   position_offset: int = 0, **extra) -> ModelConfig:
    """The BERT layout's config, shared by RoBERTa (whose positions start later)."""
    position = cfg.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ModelError(f"{source}: unsupported position_embedding_type {position!r} (only 'absolute')")
    d_model, n_head = integer(cfg, "hidden_size", source), integer(cfg, "num_attention_heads", source)
    divisible(d_model, n_head, source, "hidden_size", "num_attention_heads")
    n_token_types = cfg.get("type_vocab_size", 2)
    if type(n_token_types) is not int or n_token_types < 0:
        raise ModelError(f"{source}: type_vocab_size must be a non-negative integer, got {n_token_types!r}")
    n_positions = integer(cfg, "max_position_embeddings", source, 512)
    if n_positions <= position_offset:
        raise ModelError(f"{source}: max_position_embeddings={n_positions} leaves no position after "
                         f"the first {position_offset} (padding_idx + 1)")
    head = has_mlm_head and tied(cfg)
    return build(
        source, family=family, name=display_name(cfg),
        n_vocab=integer(cfg, "vocab_size", source), n_ctx=n_positions - position_offset,
        position_offset=position_offset,
        d_model=d_model, n_head=n_head, n_layer=integer(cfg, "num_hidden_layers", source),
        d_ff=integer(cfg, "intermediate_size", source),
        position="learned", norm="post", embed_norm=True, n_token_types=n_token_types,
        causal=bool(cfg.get("is_decoder", False)),  # BertModel masks causally as a decoder
        activation=activation(cfg, "hidden_act", source, "gelu", ACTIVATIONS),
        ln_eps=number(cfg, "layer_norm_eps", source, 1e-12), final_norm=False,
        lm_head=head, lm_head_transform=head, **extra)


def untied_head_warning(cfg: dict, source: str, has_head: bool, warnings: list[str]) -> None:
    if has_head and not tied(cfg):
        warnings.append(f"{source}: tie_word_embeddings is false and a separate LM head is not "
                        f"supported: no logits or predictions")


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    has_head = any(n.endswith("cls.predictions.transform.dense.weight") for n in names)
    untied_head_warning(cfg, source, any(n.startswith("cls.predictions.") for n in names), warnings)
    return encoder_config(cfg, source, "bert", has_head)


def encoder_keymap(config: ModelConfig, ln_names: tuple[str, str]) -> KeyMap:
    """Names inside the base model (embeddings., encoder.layer.{i}.)."""
    g, b = ln_names  # ("weight", "bias") or the old TF-ported ("gamma", "beta")
    keys: KeyMap = [
        ("wte", "embeddings.word_embeddings.weight", IDENTITY),
        ("wpe", "embeddings.position_embeddings.weight", IDENTITY),
        ("ln_emb.g", f"embeddings.LayerNorm.{g}", IDENTITY),
        ("ln_emb.b", f"embeddings.LayerNorm.{b}", IDENTITY),
    ]
    if config.n_token_types:
        keys.append(("wtt", "embeddings.token_type_embeddings.weight", IDENTITY))
    for i in range(config.n_layer):
        p = f"encoder.layer.{i}."
        for core, ckpt in (("q", "attention.self.query"), ("k", "attention.self.key"),
                           ("v", "attention.self.value"), ("o", "attention.output.dense")):
            keys.append((f"h.{i}.attn.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            keys.append((f"h.{i}.attn.{core}.b", p + ckpt + ".bias", IDENTITY))
        for core, ckpt in (("ln_1", "attention.output.LayerNorm"), ("ln_2", "output.LayerNorm")):
            keys.append((f"h.{i}.{core}.g", f"{p}{ckpt}.{g}", IDENTITY))
            keys.append((f"h.{i}.{core}.b", f"{p}{ckpt}.{b}", IDENTITY))
        for core, ckpt in (("fc", "intermediate.dense"), ("proj", "output.dense")):
            keys.append((f"h.{i}.mlp.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            keys.append((f"h.{i}.mlp.{core}.b", p + ckpt + ".bias", IDENTITY))
    return keys


def bert_keymap(config: ModelConfig, ln_names: tuple[str, str] = ("weight", "bias")) -> KeyMap:
    """Core names -> names inside bert. (the MLM head's cls.* names sit outside it)."""
    g, b = ln_names
    keys = encoder_keymap(config, ln_names)
    if config.lm_head_transform:
        keys += [
            ("head.transform.w", "cls.predictions.transform.dense.weight", TRANSPOSE),
            ("head.transform.b", "cls.predictions.transform.dense.bias", IDENTITY),
            ("head.ln.g", f"cls.predictions.transform.LayerNorm.{g}", IDENTITY),
            ("head.ln.b", f"cls.predictions.transform.LayerNorm.{b}", IDENTITY),
            ("head.bias", "cls.predictions.bias", IDENTITY),
        ]
    return keys


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    old_style = any(n.endswith("LayerNorm.gamma") for n in names)
    ln_names = ("gamma", "beta") if old_style else ("weight", "bias")
    return prefixed(bert_keymap(config, ln_names), strip_prefix(names, ("bert.",)), ("cls.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    p = strip_prefix(names, ("bert.",))
    n_vocab, d_model = shape(p + "embeddings.word_embeddings.weight", 2)
    return {"model_type": "bert", "vocab_size": n_vocab, "hidden_size": d_model,
            "max_position_embeddings": shape(p + "embeddings.position_embeddings.weight", 2)[0],
            "type_vocab_size": shape(p + "embeddings.token_type_embeddings.weight", 2)[0],
            "intermediate_size": shape(p + "encoder.layer.0.intermediate.dense.weight", 2)[0],
            "num_hidden_layers": count_layers(names, LAYER_MARKER),
            "num_attention_heads": max(d_model // ASSUMED_D_HEAD, 1)}
