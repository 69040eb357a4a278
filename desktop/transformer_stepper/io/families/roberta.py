"""RoBERTa and XLM-R: BERT's layout under roberta., position ids starting at padding_idx + 1,
one token type, a byte-level BPE (or SentencePiece) tokenizer; the MLM head is lm_head.*."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from .bert import encoder_config, encoder_keymap, untied_head_warning
from .common import ASSUMED_D_HEAD, IDENTITY, TRANSPOSE, KeyMap, count_layers, integer, prefixed, strip_prefix

MODEL_TYPES = ("roberta", "xlm-roberta")
LAYER_MARKER = "encoder.layer."


def detect(names: set[str]) -> bool:
    return any(n.startswith("roberta.") and n.endswith("attention.self.query.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    has_head = any(n.startswith("lm_head.dense.") for n in names)
    untied_head_warning(cfg, source, has_head, warnings)
    padding_idx = cfg.get("pad_token_id", 1)
    padding_idx = 1 if padding_idx is None else integer({"pad_token_id": padding_idx + 1},
                                                        "pad_token_id", source) - 1
    family = cfg.get("model_type") if cfg.get("model_type") in MODEL_TYPES else "roberta"
    return encoder_config(cfg, source, family, has_head, position_offset=padding_idx + 1,
                          skip_pad_positions=True)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = encoder_keymap(config, ("weight", "bias"))
    if config.lm_head_transform:
        keys += [("head.transform.w", "lm_head.dense.weight", TRANSPOSE),
                 ("head.transform.b", "lm_head.dense.bias", IDENTITY),
                 ("head.ln.g", "lm_head.layer_norm.weight", IDENTITY),
                 ("head.ln.b", "lm_head.layer_norm.bias", IDENTITY),
                 ("head.bias", "lm_head.bias", IDENTITY)]
    return prefixed(keys, strip_prefix(names, ("roberta.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    p = strip_prefix(names, ("roberta.",))
    n_vocab, d_model = shape(p + "embeddings.word_embeddings.weight", 2)
    return {"model_type": "roberta", "vocab_size": n_vocab, "hidden_size": d_model,
            "max_position_embeddings": shape(p + "embeddings.position_embeddings.weight", 2)[0],
            "type_vocab_size": shape(p + "embeddings.token_type_embeddings.weight", 2)[0],
            "intermediate_size": shape(p + "encoder.layer.0.intermediate.dense.weight", 2)[0],
            "num_hidden_layers": count_layers(names, LAYER_MARKER), "pad_token_id": 1,
            "num_attention_heads": max(d_model // ASSUMED_D_HEAD, 1), "layer_norm_eps": 1e-5}
