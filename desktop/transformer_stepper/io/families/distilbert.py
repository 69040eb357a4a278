"""DistilBERT: BERT's post-LN blocks with its own names (q_lin, sa_layer_norm, ffn.lin1 ...),
learned positions, no token types; the MLM head is vocab_transform / vocab_layer_norm /
vocab_projector (tied to the word embeddings)."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import (ASSUMED_D_HEAD, IDENTITY, TRANSPOSE, KeyMap, activation, build, count_layers, display_name,
                     divisible, integer, prefixed, strip_prefix, tied)

MODEL_TYPES = ("distilbert",)
LAYER_MARKER = "transformer.layer."
ACTIVATIONS = {"gelu": "gelu_erf", "relu": "relu"}


def detect(names: set[str]) -> bool:
    return any(n.endswith("attention.q_lin.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    has_head = any(n.startswith("vocab_transform.") for n in names)
    if has_head and not tied(cfg):
        warnings.append(f"{source}: tie_word_embeddings is false and a separate LM head is not "
                        f"supported: no logits or predictions")
    d_model, n_head = integer(cfg, "dim", source), integer(cfg, "n_heads", source)
    divisible(d_model, n_head, source, "dim", "n_heads")
    if cfg.get("sinusoidal_pos_embds"):   # the table is still stored: it is read as learned rows
        warnings.append(f"{source}: sinusoidal_pos_embds: the stored position table is used as is")
    head = has_head and tied(cfg)
    return build(source, family="distilbert", name=display_name(cfg),
                 n_vocab=integer(cfg, "vocab_size", source),
                 n_ctx=integer(cfg, "max_position_embeddings", source, 512),
                 d_model=d_model, n_head=n_head, n_layer=integer(cfg, "n_layers", source),
                 d_ff=integer(cfg, "hidden_dim", source), position="learned", norm="post",
                 embed_norm=True, n_token_types=0, causal=False,
                 activation=activation(cfg, "activation", source, "gelu", ACTIVATIONS),
                 ln_eps=1e-12, lm_head=head, lm_head_transform=head)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys: KeyMap = [("wte", "embeddings.word_embeddings.weight", IDENTITY),
                    ("wpe", "embeddings.position_embeddings.weight", IDENTITY),
                    ("ln_emb.g", "embeddings.LayerNorm.weight", IDENTITY),
                    ("ln_emb.b", "embeddings.LayerNorm.bias", IDENTITY)]
    for i in range(config.n_layer):
        p = f"transformer.layer.{i}."
        for core, ckpt in (("attn.q", "attention.q_lin"), ("attn.k", "attention.k_lin"),
                           ("attn.v", "attention.v_lin"), ("attn.o", "attention.out_lin"),
                           ("mlp.fc", "ffn.lin1"), ("mlp.proj", "ffn.lin2")):
            keys.append((f"h.{i}.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            keys.append((f"h.{i}.{core}.b", p + ckpt + ".bias", IDENTITY))
        for core, ckpt in (("ln_1", "sa_layer_norm"), ("ln_2", "output_layer_norm")):
            keys.append((f"h.{i}.{core}.g", p + ckpt + ".weight", IDENTITY))
            keys.append((f"h.{i}.{core}.b", p + ckpt + ".bias", IDENTITY))
    if config.lm_head_transform:
        keys += [("head.transform.w", "vocab_transform.weight", TRANSPOSE),
                 ("head.transform.b", "vocab_transform.bias", IDENTITY),
                 ("head.ln.g", "vocab_layer_norm.weight", IDENTITY),
                 ("head.ln.b", "vocab_layer_norm.bias", IDENTITY),
                 ("head.bias", "vocab_projector.bias", IDENTITY)]
    return prefixed(keys, strip_prefix(names, ("distilbert.",)), ("vocab_",))


def infer_hf_config(shape, names: set[str]) -> dict:
    p = strip_prefix(names, ("distilbert.",))
    n_vocab, d_model = shape(p + "embeddings.word_embeddings.weight", 2)
    if d_model % ASSUMED_D_HEAD:
        raise ModelError(f"no config.json, and dim={d_model} is not a multiple of {ASSUMED_D_HEAD}")
    return {"model_type": "distilbert", "vocab_size": n_vocab, "dim": d_model,
            "max_position_embeddings": shape(p + "embeddings.position_embeddings.weight", 2)[0],
            "hidden_dim": shape(p + "transformer.layer.0.ffn.lin1.weight", 2)[0],
            "n_layers": count_layers(names, LAYER_MARKER), "n_heads": d_model // ASSUMED_D_HEAD}
