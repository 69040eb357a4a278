"""The stages an encoder–decoder's stepper walks, in two sections: the encoder's (the one-stack
stages of core/model/stages.py that apply to its config) and the decoder's, with Cross-attention
between self-attention's output projection and the feed-forward, where the decoder block runs
it. As data, like core/model/stages.py; the one-stack stages keep their entries and views."""
from __future__ import annotations

from .seq2seq import Seq2SeqConfig
from .stages import Stage, available_stages, stage

# numbered as the output projection it follows inside a decoder block (the one-stack stages keep
# their numbers in both sections)
CROSS_ATTENTION = Stage(
    "cross_attention", "Cross-attention", per_layer=True, per_head=True,
    number=stage("output_projection").number,
    function="core.model.seq2seq.cross_attention",
    arrays=(("cross_q", "head"), ("cross_k", "head"), ("cross_v", "head"),
            ("cross_scores", "head"), ("cross_attn_weights", "head"), ("cross_head_outputs", "head"),
            ("cross_attn_out", "layer"), ("cross_residual", "layer")),
    computes=("cross_attn_in", "cross_q", "cross_scores_raw", "cross_scores", "cross_attn_weights",
              "cross_head_outputs", "cross_heads_concat", "cross_attn_out", "cross_residual"))

SECTIONS = ("Encoder", "Decoder")


def seq2seq_stages(config: Seq2SeqConfig) -> list[tuple[str, Stage]]:
    """[(section, stage)] in the order the pass runs. The encoder has no head (no prediction);
    the decoder's logit lens is left out (the lens reads the one-stack head, without T5's
    scaling or final_logits_bias)."""
    walk = [("Encoder", s) for s in available_stages(config.encoder)]
    for s in available_stages(config.decoder):
        if s.key == "logit_lens":
            continue
        walk.append(("Decoder", s))
        if s.key == "output_projection":
            walk.append(("Decoder", CROSS_ATTENTION))
    return walk
