"""The residual stream as a sum of its parts, and each part's direct logit attribution.

In a pre-LN block (GPT-2, Llama, the built-in model) nothing rescales the stream between
layers: a layer adds its attention output and its feed-forward output to it. So at a position,
the stream after layer L is exactly

    embedding output + Σ_{l ≤ L} (attention output_l + feed-forward output_l)

and each attention output splits further into one part per head (the head's output through its
rows of W_O) plus W_O's bias. The logit of a token t is the final norm of the stream dotted with
t's row of the output head; the norm's centring is linear and its scale 1/σ (1/RMS) is one
number for the whole stream, so, with that scale frozen, the logit is the sum of each part's

    (part − mean(part)) · (γ ⊙ W_t) · 1/σ        (RMSNorm: part · (g ⊙ W_t) · 1/RMS)

plus a constant β · W_t (+ the head's bias): the direct logit attribution. Post-LN blocks (BERT)
normalise the stream after every sublayer, so it is not a sum of the sublayers' outputs and is
not decomposed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..model.errors import ModelError
from ..model.head import output_direction


@dataclass(frozen=True)
class Decomposition:
    position: int
    layer: int                       # the stream after this layer
    names: tuple[str, ...]           # "embedding", "attn 0", "mlp 0", "attn 1", ...
    parts: np.ndarray                # [n_parts, d_model]; they sum to `stream`
    stream: np.ndarray               # [d_model] the traced residual stream (layer_out)
    head_parts: np.ndarray           # [layer + 1, n_head, d_model] each head through W_O
    attn_bias: np.ndarray            # [layer + 1, d_model] W_O's bias (zero without one)
    token_id: Optional[int] = None   # the token attributed to (None: no LM head)
    scale: float = 1.0               # the final norm's 1/σ (or 1/RMS) at this stream; 1 without
    contributions: Optional[np.ndarray] = None        # [n_parts] each part's share of the logit
    unscaled: Optional[np.ndarray] = None             # [n_parts] the same before × scale
    head_contributions: Optional[np.ndarray] = None   # [layer + 1, n_head]
    bias_contributions: Optional[np.ndarray] = None   # [layer + 1] W_O's bias (zero without one)
    constant: float = 0.0            # β · W_t (+ head bias): the logit's part no stream part owns
    logit: Optional[float] = None    # Σ contributions + constant

    @property
    def residual_error(self) -> float:
        """max |Σ parts − stream|: float rounding only."""
        return float(np.max(np.abs(self.parts.sum(axis=0) - self.stream)))

    def layer_bars(self) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
        """The direct logit attribution as stacked bars, one per layer: -> (bar names
        "embedding", "layer 0", ...; segment names "embedding", "head 0", ..., ["W_O bias"],
        "FFN"; values [n_bars, n_segments], 0 where a segment is not part of a bar). A layer's
        heads (and W_O's bias) are its attention contribution split through W_O, so its bar
        sums to its attention + feed-forward contributions and all bars to Σ contributions."""
        if self.contributions is None:
            raise ValueError("no LM head: nothing is attributed")
        n_layers, n_head = self.head_contributions.shape
        with_bias = bool(np.any(self.attn_bias))
        segments = ("embedding", *(f"head {h}" for h in range(n_head)),
                    *(("W_O bias",) if with_bias else ()), "FFN")
        values = np.zeros((1 + n_layers, len(segments)))
        values[0, 0] = self.contributions[0]
        values[1:, 1:1 + n_head] = self.head_contributions
        if with_bias:
            values[1:, 1 + n_head] = self.bias_contributions
        values[1:, -1] = self.contributions[2::2]
        return ("embedding", *(f"layer {l}" for l in range(n_layers))), segments, values


def decompose(model, trace, position: int, layer: Optional[int] = None,
              token_id: Optional[int] = None) -> Decomposition:
    """The stream after `layer` (default: the last) at `position`, as embedding + attention and
    feed-forward outputs; with an LM head, each part's direct attribution to `token_id`
    (default: the predicted token at that position)."""
    config = trace.config
    if config.norms_branch_output:
        raise ModelError(f"{config.family}: each sublayer's output is normalised before it is added "
                         "(post_attn_ln, post_mlp_ln), so the heads' outputs do not add up to the stream")
    if config.norm != "pre":
        raise ModelError(f"{config.family}: post-LN blocks normalise the stream after every sublayer, "
                         "so it is not a sum of the sublayers' outputs")
    layer = config.n_layer - 1 if layer is None else int(layer)
    if not 0 <= layer < config.n_layer:
        raise ModelError(f"layer {layer} is out of range (0..{config.n_layer - 1})")
    if not 0 <= position < trace.n_seq:
        raise ModelError(f"position {position} is outside the text's {trace.n_seq} tokens")
    i, d_head = position, config.d_head
    names, parts = ["embedding"], [trace.arrays["embedding_output"][i].astype(np.float64)]
    head_parts, biases = [], []
    for l in range(layer + 1):
        w_o = model.params[f"h.{l}.attn.o.w"].astype(np.float64)           # [n_head·d_head, d]
        outputs = trace.layer("head_outputs", l)[:, i].astype(np.float64)  # [n_head, d_head]
        per_head = np.einsum("hc,hcd->hd", outputs, w_o.reshape(config.n_head, d_head, -1))
        bias = (model.params[f"h.{l}.attn.o.b"].astype(np.float64) if config.o_bias
                else np.zeros(config.d_model))
        head_parts.append(per_head)
        biases.append(bias)
        names += [f"attn {l}", f"mlp {l}"]
        parts += [trace.layer("attn_out", l)[i].astype(np.float64),
                  trace.layer("mlp_out", l)[i].astype(np.float64)]
    result = dict(position=i, layer=layer, names=tuple(names), parts=np.stack(parts),
                  stream=trace.residual["layer_out"][layer][i].astype(np.float64),
                  head_parts=np.stack(head_parts), attn_bias=np.stack(biases))
    if not config.lm_head or not trace.has_logits:
        return Decomposition(**result)
    if token_id is None:
        token_id = int(np.argmax(trace.logits_at(i)))
    direction = output_direction(model.params, config, token_id).astype(np.float64)
    stream, scale, constant = result["stream"], 1.0, 0.0
    center = False
    if config.final_norm:
        g = model.params["ln_f.g"].astype(np.float64)
        if config.norm_kind == "rms":
            scale = 1.0 / np.sqrt(np.mean(stream ** 2) + config.ln_eps)
        else:
            centred = stream - stream.mean()
            scale = 1.0 / np.sqrt(np.mean(centred ** 2) + config.ln_eps)
            constant = float(model.params["ln_f.b"].astype(np.float64) @ direction)
            center = True
        direction = direction * g

    def attribute(vectors: np.ndarray) -> np.ndarray:
        if center:
            vectors = vectors - vectors.mean(axis=-1, keepdims=True)
        return vectors @ direction

    unscaled = attribute(result["parts"])
    contributions = unscaled * scale
    return Decomposition(**result, token_id=token_id, scale=float(scale), contributions=contributions,
                         unscaled=unscaled, head_contributions=attribute(result["head_parts"]) * scale,
                         bias_contributions=attribute(result["attn_bias"]) * scale,
                         constant=constant, logit=float(contributions.sum() + constant))
