"""The numbers and conditions every stage's explanation text may quote: the layer and head
shown, the model's shape and the selected token (a view adds its own: StageView.stage_values)."""
from __future__ import annotations

from typing import Optional

from ...core.analysis.labels import ACTIVATION_LABELS, NORM_LABELS
from ...core.trace.trace import Trace


def common_values(session, trace: Optional[Trace]) -> tuple[dict, dict]:
    """(values, flags) of the explanation template from `session` (the view state: layer,
    head, temperature, selected token) and `trace`, the one shown (None: no trace)."""
    values: dict = {"layer": session.layer, "head": session.head,
                    "next_layer": session.layer + 1,
                    "prev_layer": "embedding" if session.layer == 0 else session.layer - 1,
                    "temperature": f"{session.temperature:.2f}"}
    flags: dict = {"trace": trace is not None}
    if trace is not None:
        c = trace.config
        i = min(session.selected_token, trace.n_seq - 1)
        values.update(n_seq=trace.n_seq, d_model=c.d_model, n_head=c.n_head, d_head=c.d_head, d_v=c.d_v,
                      d_concat=c.n_head * c.d_v,
                      n_layer=c.n_layer, d_ff=c.d_ff, n_vocab=c.n_vocab, n_ctx=c.n_ctx,
                      last_layer=c.n_layer - 1, family=c.family, model=c.name,
                      token=session.token_labels()[i], token_index=i, token_id=int(trace.input_ids[i]),
                      eps=f"{c.ln_eps:g}", n_types=c.n_token_types,
                      activation=ACTIVATION_LABELS[c.activation],
                      norm_kind_name=NORM_LABELS[c.norm_kind], n_kv_heads=c.n_kv_heads,
                      group_size=c.group_size, last_id=c.n_vocab - 1, last_position=trace.n_seq - 1)
        flags.update(last_layer=session.layer == c.n_layer - 1, causal=c.causal, sinusoidal=c.position == "sinusoidal",
                     learned=c.position == "learned", token_types=c.n_token_types > 0,
                     embed_norm=c.embed_norm, pre_ln=c.norm == "pre", post_ln=c.norm == "post",
                     lm_head=c.lm_head, final_norm=c.final_norm,
                     mlm=c.lm_head and not c.causal, rotary=c.position == "rotary",
                     rms=c.norm_kind == "rms", gated=c.gated_mlp, gqa=c.group_size > 1,
                     added_positions=c.position in ("learned", "sinusoidal"), tied=c.tied_head,
                     concat=c.position == "concat")
    return values, flags
