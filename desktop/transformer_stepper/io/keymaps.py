"""Per family: config.json -> ModelConfig, and checkpoint tensor names -> the core's names.

Each map yields (core_name, checkpoint_name, transform); transforms normalise layouts once,
here, so the core always sees weights as [d_in, d_out]."""
from __future__ import annotations

from typing import Callable, Iterator, Optional

import numpy as np

from ..core.config import ModelConfig
from ..core.errors import ModelError

Transform = Optional[Callable[[np.ndarray], np.ndarray]]
KeyMap = list[tuple[str, str, Transform]]

_ACTIVATIONS = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}


def _transpose(w: np.ndarray) -> np.ndarray:
    return w.T  # nn.Linear stores [out, in]


def _activation(name: str, source: str) -> str:
    if name not in _ACTIVATIONS:
        raise ModelError(f"{source}: unsupported activation {name!r}")
    return _ACTIVATIONS[name]


def _require(cfg: dict, key: str, source: str):
    if key not in cfg:
        raise ModelError(f"{source}: config.json has no {key!r}")
    return cfg[key]


# ---------------------------------------------------------------------------------------- BERT
def bert_config(cfg: dict, source: str, has_mlm_head: bool) -> ModelConfig:
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{source}: unsupported position_embedding_type "
                         f"{cfg['position_embedding_type']!r} (only 'absolute')")
    return ModelConfig(
        family="bert", name=cfg.get("_name_or_path") or "",
        n_vocab=_require(cfg, "vocab_size", source), n_ctx=cfg.get("max_position_embeddings", 512),
        d_model=_require(cfg, "hidden_size", source), n_head=_require(cfg, "num_attention_heads", source),
        n_layer=_require(cfg, "num_hidden_layers", source), d_ff=_require(cfg, "intermediate_size", source),
        position="learned", norm="post", embed_norm=True, n_token_types=cfg.get("type_vocab_size", 2),
        causal=False, activation=_activation(cfg.get("hidden_act", "gelu"), source),
        ln_eps=float(cfg.get("layer_norm_eps", 1e-12)), final_norm=False,
        lm_head=has_mlm_head, lm_head_transform=has_mlm_head)


def bert_keymap(config: ModelConfig, ln_names: tuple[str, str]) -> KeyMap:
    g, b = ln_names  # ("weight", "bias") or the old TF-ported ("gamma", "beta")
    keys: KeyMap = [
        ("wte", "embeddings.word_embeddings.weight", None),
        ("wpe", "embeddings.position_embeddings.weight", None),
        ("wtt", "embeddings.token_type_embeddings.weight", None),
        ("ln_emb.g", f"embeddings.LayerNorm.{g}", None),
        ("ln_emb.b", f"embeddings.LayerNorm.{b}", None),
    ]
    for i in range(config.n_layer):
        p = f"encoder.layer.{i}."
        for core, ckpt in (("q", "attention.self.query"), ("k", "attention.self.key"),
                           ("v", "attention.self.value"), ("o", "attention.output.dense")):
            keys.append((f"h.{i}.attn.{core}.w", p + ckpt + ".weight", _transpose))
            keys.append((f"h.{i}.attn.{core}.b", p + ckpt + ".bias", None))
        for core, ckpt in (("ln_1", "attention.output.LayerNorm"), ("ln_2", "output.LayerNorm")):
            keys.append((f"h.{i}.{core}.g", f"{p}{ckpt}.{g}", None))
            keys.append((f"h.{i}.{core}.b", f"{p}{ckpt}.{b}", None))
        for core, ckpt in (("fc", "intermediate.dense"), ("proj", "output.dense")):
            keys.append((f"h.{i}.mlp.{core}.w", p + ckpt + ".weight", _transpose))
            keys.append((f"h.{i}.mlp.{core}.b", p + ckpt + ".bias", None))
    if config.lm_head_transform:
        keys += [
            ("head.transform.w", "cls.predictions.transform.dense.weight", _transpose),
            ("head.transform.b", "cls.predictions.transform.dense.bias", None),
            ("head.ln.g", f"cls.predictions.transform.LayerNorm.{g}", None),
            ("head.ln.b", f"cls.predictions.transform.LayerNorm.{b}", None),
            ("head.bias", "cls.predictions.bias", None),
        ]
    return keys


# ---------------------------------------------------------------------------------------- GPT-2
def gpt2_config(cfg: dict, source: str) -> ModelConfig:
    for flag, ok in (("scale_attn_by_inverse_layer_idx", False), ("reorder_and_upcast_attn", False),
                     ("scale_attn_weights", True)):
        if cfg.get(flag, ok) != ok:
            raise ModelError(f"{source}: unsupported GPT-2 option {flag}={cfg[flag]!r}")
    d_model = _require(cfg, "n_embd", source)
    return ModelConfig(
        family="gpt2", name=cfg.get("_name_or_path") or "",
        n_vocab=_require(cfg, "vocab_size", source), n_ctx=cfg.get("n_positions", 1024),
        d_model=d_model, n_head=_require(cfg, "n_head", source), n_layer=_require(cfg, "n_layer", source),
        d_ff=cfg.get("n_inner") or 4 * d_model, position="learned", norm="pre", embed_norm=False,
        n_token_types=0, causal=True, activation=_activation(cfg.get("activation_function", "gelu_new"), source),
        ln_eps=float(cfg.get("layer_norm_epsilon", 1e-5)), final_norm=True, lm_head=True)


def _columns(start: int, stop: int) -> Transform:
    return lambda w: w[..., start:stop]  # a view: c_attn is [d_in, 3*d_model], q|k|v side by side


def gpt2_keymap(config: ModelConfig) -> KeyMap:
    d = config.d_model
    keys: KeyMap = [("wte", "wte.weight", None), ("wpe", "wpe.weight", None),
                    ("ln_f.g", "ln_f.weight", None), ("ln_f.b", "ln_f.bias", None)]
    for i in range(config.n_layer):
        p = f"h.{i}."
        for j, name in enumerate("qkv"):  # Conv1D weights are already [in, out]
            keys.append((f"h.{i}.attn.{name}.w", p + "attn.c_attn.weight", _columns(j * d, (j + 1) * d)))
            keys.append((f"h.{i}.attn.{name}.b", p + "attn.c_attn.bias", _columns(j * d, (j + 1) * d)))
        keys += [
            (f"h.{i}.attn.o.w", p + "attn.c_proj.weight", None), (f"h.{i}.attn.o.b", p + "attn.c_proj.bias", None),
            (f"h.{i}.ln_1.g", p + "ln_1.weight", None), (f"h.{i}.ln_1.b", p + "ln_1.bias", None),
            (f"h.{i}.ln_2.g", p + "ln_2.weight", None), (f"h.{i}.ln_2.b", p + "ln_2.bias", None),
            (f"h.{i}.mlp.fc.w", p + "mlp.c_fc.weight", None), (f"h.{i}.mlp.fc.b", p + "mlp.c_fc.bias", None),
            (f"h.{i}.mlp.proj.w", p + "mlp.c_proj.weight", None), (f"h.{i}.mlp.proj.b", p + "mlp.c_proj.bias", None),
        ]
    return keys


# ----------------------------------------------------------------------- inferring from names
def strip_prefix(names: Iterator[str], prefixes: tuple[str, ...]) -> str:
    """The prefix ('bert.', 'transformer.' or '') under which the base model's tensors live."""
    names = list(names)
    for prefix in prefixes:
        if any(n.startswith(prefix) for n in names):
            return prefix
    return ""


def detect_family(names: set[str]) -> Optional[str]:
    if any(n.endswith("attn.c_attn.weight") for n in names):
        return "gpt2"
    if any(n.endswith("attention.self.query.weight") for n in names):
        return "bert"
    if "wte" in names and any(n.endswith(".attn.q.w") for n in names):
        return "stepper"
    return None


def count_layers(names: set[str], marker: str) -> int:
    """Number of blocks: the largest i with `<marker>{i}.` in some name, plus one."""
    found = set()
    for n in names:
        at = n.find(marker)
        if at >= 0:
            rest = n[at + len(marker):].split(".", 1)[0]
            if rest.isdigit():
                found.add(int(rest))
    return max(found) + 1 if found else 0
