"""What the encoder–decoder window runs in its workers (state/seq2seq.py): plain functions. Each returns
(model, trace with the shown layer's detail ready, the target text to show or None)."""
from __future__ import annotations

from typing import Optional

from ..core.model.errors import ModelError
from ..core.trace.seq2seq_generate import generate
from ..io.loader import load_model


def stack_models(model):
    """The one-stack stand-ins the stage views read (made once per model)."""
    made = getattr(model, "_stack_models", None)
    if made is None:
        made = model._stack_models = model.stack_models()
    return made


def prepared(model, trace, layer: int):
    for stack in (trace.encoder, trace.decoder):
        stack.prepare(min(layer, stack.config.n_layer - 1))
    return model, trace, None


def open_and_trace(path: Optional[str], source: str, target: str):
    model = load_model(path)
    if not getattr(model, "is_seq2seq", False):
        raise ModelError(f"{path}: a {model.config.family} model is not an encoder–decoder; "
                         f"open it in the main window")
    stack_models(model)
    return trace(model, source or "The bank of the river.", target, 0)


def trace(model, source: str, target: str, layer: int):
    return prepared(model, model.trace(source, target), layer)


def target_text(model, trace) -> str:
    ids = [int(i) for i in trace.decoder.input_ids[1:] if i != model.config.eos_token_id]
    return "".join(model.target_tokenizer.continuation([], ids)).strip()


def steps(model, trace, n_tokens: int, layer: int):
    done = generate(model, trace, n_tokens)
    final = done[-1] if done else trace
    return (*prepared(model, final, layer)[:2], target_text(model, final))


def translate(model, source: str, target: str, layer: int, n_tokens: int = 64):
    """A new source: traced afresh (the target typed so far forced), then continued to the end."""
    return steps(model, model.trace(source, target), n_tokens, layer)


def append(model, trace, token_id: int, layer: int):
    """The user's choice of the next target token (a click on a prediction bar)."""
    final = model.extend(trace, [token_id])
    return (*prepared(model, final, layer)[:2], target_text(model, final))


def intervene(model, trace, interventions, clean_translation=None):
    """The clean trace's source and target through the model intervened; each stack's
    difference at every stage; the clean and intervened translations of the source
    (`clean_translation`: (ids, text) already known for this model and source)."""
    from ..core.analysis.seq2seq_differences import intervene_and_compare, translations

    _, intervened, differences = intervene_and_compare(model, trace, interventions)
    return intervened, differences, translations(model, trace.source_text, interventions,
                                                 clean=clean_translation)

