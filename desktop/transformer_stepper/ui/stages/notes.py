"""The notes a stage view shows above its figures, in words: what the interventions of the
trace shown change at this stage, and which positions a pass took from the KV cache."""
from __future__ import annotations

import numpy as np

from PySide6.QtWidgets import QLabel

from ...core.model import stages
from ...core.trace.trace import Trace


def intervention_note(interventions, stage: stages.Stage, layer: int, head: int) -> str:
    """What the interventions of the trace shown change here, in a line ('' for nothing)."""
    from ...core.model.interventions import (
        AblateHead,
        DisableExpert,
        ForceExpert,
        HeadTemperature,
        NoPositions,
        ShufflePositions,
        SwapEmbedding)

    notes = []
    for item in interventions:
        if isinstance(item, (AblateHead, HeadTemperature)) and stage.per_layer and item.layer == layer:
            if stage.key in ("qkv", "scores") or (stage.key == "softmax" and isinstance(item, AblateHead)):
                continue                                 # acts after these stages
            if stage.per_head and item.head != head:
                notes.append(f"head {item.head} of this layer is {'ablated' if isinstance(item, AblateHead) else 'tempered'}"
                             " (select it to see)")
            elif isinstance(item, AblateHead):
                by = "zeros" if item.mode == "zero" else "its mean over positions"
                notes.append(f"head {item.head} is ablated: its output (weights · V) is replaced by {by} "
                             "before W_O; its weights and values are still computed")
            else:
                notes.append(f"head {item.head}'s softmax is softmax(scores / {item.temperature:g})")
        elif (isinstance(item, (DisableExpert, ForceExpert)) and item.layer == layer
              and stage.key in ("router", "feed_forward")):
            notes.append(f"expert {item.expert} is disabled: its router logit is −∞ before the softmax"
                         if isinstance(item, DisableExpert) else
                         f"position {item.position} is sent to expert {item.expert} (in place of its "
                         f"last choice, gate = that expert's probability)")
        elif isinstance(item, SwapEmbedding) and stage.key in ("embedding", "position_addition"):
            notes.append(f"position {item.position} is looked up as token id {item.token_id} "
                         "(the labels still show the typed token)")
        elif isinstance(item, (NoPositions, ShufflePositions)) and stage.key in (
                "position_encoding", "position_addition", "qkv"):
            notes.append("no position encoding is added or rotated in" if isinstance(item, NoPositions)
                         else f"the position encodings are shuffled (seed {item.seed})")
    return "Intervened here: " + "; ".join(dict.fromkeys(notes)) + "." if notes else ""


def positions(first: int, last: int) -> str:
    """'position 3' or 'positions 3–5'."""
    return f"position {first}" if first == last else f"positions {first}–{last}"


def cache_note(trace: Trace, per_head: bool) -> str:
    """An attention stage's note after a pass that reused cached positions ('' for none). The
    pass is said to be a generation step only when the new positions are generated tokens; any
    other new text (typed, a walk's or a session's) is said to share its beginning."""
    reused = trace.n_seq - trace.computed_rows
    if not (per_head and trace.kv_cache is not None and 0 < reused < trace.n_seq):
        return ""
    new = positions(reused, trace.n_seq - 1)
    generated = trace.generated
    stepped = generated is not None and len(generated) == trace.n_seq and bool(np.all(generated[reused:]))
    why = ("a generation step" if stepped else
           f"the text's first {reused} token{'s' if reused > 1 else ''} unchanged since the pass before")
    config = trace.config
    if config.is_mla:            # the cache keeps latents: keys and values are rebuilt from them
        return (f"KV cache: the last pass ({why}) computed only {new}. The cache holds no keys or "
                f"values: for {positions(0, reused - 1)} ({reused} of {trace.n_seq}) it kept each "
                f"token's latent c_kv ({config.kv_lora_rank} numbers) and rotated k_rope "
                f"({config.d_rotary}), from earlier passes, unchanged; every head's k and v of all "
                f"{trace.n_seq} were rebuilt from them (c_kv·W_kv_b) for the new queries.")
    return (f"KV cache: the last pass ({why}) computed only {new}. The keys and values of "
            f"{positions(0, reused - 1)} ({reused} of {trace.n_seq}) came from earlier passes, "
            f"unchanged; each new query's row reads all {trace.n_seq}.")


def note_label(name: str, color: str, background: str) -> QLabel:
    """A hidden, wrapping one-line note above a view's figures, in its own colours."""
    note = QLabel()
    note.setObjectName(name)
    note.setWordWrap(True)
    note.setStyleSheet(f"color: {color}; background: {background}; padding: 3px 6px;")
    note.setVisible(False)
    return note
