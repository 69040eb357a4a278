"""GPT-NeoX and Pythia (model_type gpt_neox), the models much interpretability work uses:
  parallel residual (use_parallel_residual, default true): x + attn(ln_1(x)) + mlp(ln_2(x)),
    both branches reading the layer's input; false: the usual sequential pre-LN block
  partial rotary: the first int(d_head · rotary_pct) dims of each head turn (Pythia: 0.25)
  attention.query_key_value [3·d_model, d_model]: per head, rows [q | k | v] of d_head each
    (interleaved head by head, not q | k | v blocks): split here into q, k, v
  LayerNorm with biases, biases on every projection (attention_bias), exact (erf) GELU,
  an untied output head embed_out (tie_word_embeddings false).

transformers 5's GPTNeoXConfig defaults for the keys read here: vocab_size 50432, hidden_size
6144, num_hidden_layers 44, num_attention_heads 64, intermediate_size 24576, hidden_act gelu,
max_position_embeddings 2048, layer_norm_eps 1e-5, tie_word_embeddings false,
use_parallel_residual true, attention_bias true, rotary_pct 0.25 (partial_rotary_factor),
rotary_emb_base 10000 (rope_theta); rope scaling as io/families/rope.py."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import (IDENTITY, TRANSPOSE, KeyMap, Transform, activation, build, display_name,
                     divisible, flag, integer, number, prefixed, strip_prefix, tied)
from .rope import rope_fields

MODEL_TYPES = ("gpt_neox",)
LAYER_MARKER = "layers."
ACTIVATIONS = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
               "gelu_fast": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "silu": "silu"}
CONFIG_DEFAULTS = dict(vocab_size=50432, hidden_size=6144, num_hidden_layers=44, num_attention_heads=64,
                       intermediate_size=24576, hidden_act="gelu", max_position_embeddings=2048,
                       layer_norm_eps=1e-5, tie_word_embeddings=False, use_parallel_residual=True,
                       attention_bias=True)


class HeadInterleaved(Transform):
    """Part `index` (0 q, 1 k, 2 v) of GPT-NeoX's query_key_value, whose output rows are per
    head [q | k | v]: weight [3·d, d_in] -> [d_in, d] (heads in order), bias [3·d] -> [d]."""

    def __init__(self, index: int, n_head: int) -> None:
        self.index, self.n_head = index, n_head

    def checkpoint_shape(self, core_shape):
        if len(core_shape) == 1:
            return (3 * core_shape[0],)
        return (3 * core_shape[1], core_shape[0])

    def __call__(self, w):
        per_head = w.reshape(self.n_head, 3, w.shape[0] // (3 * self.n_head), *w.shape[1:])
        part = per_head[:, self.index].reshape(w.shape[0] // 3, *w.shape[1:])  # a copy: rows gathered
        return part if part.ndim == 1 else part.T


def detect(names: set[str]) -> bool:
    return any(n.endswith("attention.query_key_value.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = {**CONFIG_DEFAULTS, **cfg}
    d_model, n_head = integer(cfg, "hidden_size", source), integer(cfg, "num_attention_heads", source)
    divisible(d_model, n_head, source, "hidden_size", "num_attention_heads")
    n_ctx = integer(cfg, "max_position_embeddings", source)
    bias = flag(cfg, "attention_bias", source, True)
    is_tied = tied(cfg, default=False)
    has_head = is_tied or any(n == "embed_out.weight" or n.endswith(".embed_out.weight") for n in names)
    fields = dict(
        family="gpt_neox", name=display_name(cfg), n_vocab=integer(cfg, "vocab_size", source), n_ctx=n_ctx,
        d_model=d_model, n_head=n_head, n_layer=integer(cfg, "num_hidden_layers", source),
        d_ff=integer(cfg, "intermediate_size", source), position="rotary", norm="pre", norm_kind="layer",
        causal=True, activation=activation(cfg, "hidden_act", source, "gelu", ACTIVATIONS),
        ln_eps=number(cfg, "layer_norm_eps", source, 1e-5), final_norm=True, lm_head=has_head,
        tied_head=is_tied, qkv_bias=bias, o_bias=bias, mlp_bias=True,
        parallel_residual=flag(cfg, "use_parallel_residual", source, True))
    fields.update(rope_fields(cfg, source, d_model // n_head, n_ctx, theta_key="rotary_emb_base",
                              partial_key="rotary_pct", partial_default=0.25, model_type="gpt_neox"))
    return build(source, **fields)


def neox_keymap(config: ModelConfig) -> KeyMap:
    keys: KeyMap = [("wte", "embed_in.weight", IDENTITY), ("ln_f.g", "final_layer_norm.weight", IDENTITY),
                    ("ln_f.b", "final_layer_norm.bias", IDENTITY)]
    for i in range(config.n_layer):
        p = f"layers.{i}."
        for core, ckpt in (("ln_1", "input_layernorm"), ("ln_2", "post_attention_layernorm")):
            keys += [(f"h.{i}.{core}.g", p + ckpt + ".weight", IDENTITY),
                     (f"h.{i}.{core}.b", p + ckpt + ".bias", IDENTITY)]
        for j, name in enumerate("qkv"):
            keys.append((f"h.{i}.attn.{name}.w", p + "attention.query_key_value.weight",
                         HeadInterleaved(j, config.n_head)))
            if config.qkv_bias:
                keys.append((f"h.{i}.attn.{name}.b", p + "attention.query_key_value.bias",
                             HeadInterleaved(j, config.n_head)))
        for core, ckpt, bias in (("attn.o", "attention.dense", config.o_bias),
                                 ("mlp.fc", "mlp.dense_h_to_4h", True), ("mlp.proj", "mlp.dense_4h_to_h", True)):
            keys.append((f"h.{i}.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            if bias:
                keys.append((f"h.{i}.{core}.b", p + ckpt + ".bias", IDENTITY))
    if config.lm_head and not config.tied_head:
        keys.append(("lm_head.w", "embed_out.weight", IDENTITY))
    return keys


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return prefixed(neox_keymap(config), strip_prefix(names, ("gpt_neox.",)), ("embed_out.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a GPT-NeoX/Pythia file does not say its head count, rotary fraction "
                     "(rotary_pct) or residual layout; put the model's config.json (from its Hugging "
                     "Face repository, e.g. EleutherAI/pythia-160m) beside it")
