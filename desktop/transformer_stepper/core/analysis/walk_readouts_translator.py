"""The first question's encoder–decoder step: the built-in translator translates its example
sentence greedily, and the numbers say how (the encoder once over the source, the decoder one
token per step from the start token, cross-attention reading the encoder's output)."""
from __future__ import annotations

import numpy as np

from .compare import piece_text
from ..model.errors import ModelError
from .walk_context import Context, _register

SOURCE = "the old man saw the red bank near the river ."


@_register
def read_translator(c: Context) -> dict:
    from ..trace.seq2seq_generate import generate

    load = c.extras.get("translator")
    if load is None:
        raise ModelError("the built-in translator is not available")
    model = load()
    start = model.trace(SOURCE)
    steps = generate(model, start, 64)
    final = steps[-1] if steps else start
    eos = model.config.eos_token_id
    target = [int(i) for i in final.decoder.input_ids[1:] if int(i) != eos]
    words = [piece_text(model.target_tokenizer.id_to_token(i) or "?") for i in target]
    source_words = [piece_text(t) for t in final.encoder.tokens]
    # the verb, last before the full stop in Velan: which source word the decoder read most
    # when it wrote it (cross-attention of the last layer, its heads averaged; the query at
    # decoder position k writes word k, position 0 being the start token)
    weights = final.cross_attentions[-1].mean(axis=0)            # [n_decoder, n_source]
    verb_at = len(words) - 2 if words[-1:] == ["."] else len(words) - 1
    read = int(np.argmax(weights[verb_at])) if verb_at >= 0 else 0
    start_token = piece_text(model.target_tokenizer.id_to_token(int(final.decoder.input_ids[0])) or "?")
    return dict(translator_name=model.name, translation_source=SOURCE, translation=" ".join(words),
                n_source_tokens=final.encoder.n_seq, n_decoder_steps=len(steps),
                start_token=start_token, verb=words[verb_at] if verb_at >= 0 else "—",
                verb_reads=source_words[read], encoder_layers=model.config.encoder.n_layer,
                decoder_layers=model.config.decoder.n_layer, last_decoder_layer=model.config.decoder.n_layer - 1)
