"""Hugging Face's outputs with an encoder–decoder's head ablated or its source's positions
removed, by forward hooks on the committed fixtures t5_tiny, bart_tiny and marian_tiny:

    python tests/make_seq2seq_intervention_fixtures.py
        # writes tests/fixtures/hf_outputs/seq2seq_interventions.npz

A head is ablated by a forward pre-hook on its attention's output projection that zeroes the
head's d_head columns of the input (cross-attention: T5's EncDecAttention.o, BART/Marian's
encoder_attn.out_proj; self-attention: SelfAttention.o / self_attn.out_proj). The source's
positions are removed by a forward hook returning zeros from the encoder's position module
(BART/Marian: embed_positions; T5: its relative_attention_bias, the only position it has).
Per model and case, for make_seq2seq_fixtures.PAIRS[0] teacher-forced: encoder_hidden_states,
decoder_hidden_states, cross_attentions, logits; and generated: greedy generate under the hook
(at most 12 new tokens, stopping at EOS)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
NAMES = {"t5_tiny": "T5ForConditionalGeneration", "bart_tiny": "BartForConditionalGeneration",
         "marian_tiny": "MarianMTModel"}
# case -> (stack, layer, head), or "positions"
CASES = {"cross_1_2": ("cross", 1, 2), "encoder_0_1": ("encoder", 0, 1), "decoder_1_3": ("decoder", 1, 3),
         "no_source_positions": "positions"}


def _projection(model, stack: str, layer: int):
    if model.config.model_type == "t5":
        blocks = (model.encoder if stack == "encoder" else model.decoder).block
        return blocks[layer].layer[1].EncDecAttention.o if stack == "cross" else blocks[layer].layer[0].SelfAttention.o
    inner = model.model.encoder if stack == "encoder" else model.model.decoder
    return inner.layers[layer].encoder_attn.out_proj if stack == "cross" else inner.layers[layer].self_attn.out_proj


def _hook(model, case):
    import torch

    if case == "positions":
        if model.config.model_type == "t5":
            module = model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias
        else:
            module = model.model.encoder.embed_positions
        return module.register_forward_hook(lambda _m, _i, out: torch.zeros_like(out))
    stack, layer, head = case
    d_head = model.config.d_kv if model.config.model_type == "t5" else model.config.d_model // model.config.encoder_attention_heads
    columns = slice(head * d_head, (head + 1) * d_head)

    def zero_head(_module, args):
        x = args[0].clone()
        x[..., columns] = 0
        return (x, *args[1:])

    return _projection(model, stack, layer).register_forward_pre_hook(zero_head)


def outputs(model, tokenizer_file: Path) -> dict[str, np.ndarray]:
    import torch
    from make_seq2seq_fixtures import PAIRS, token_ids

    source, target = PAIRS[0]
    ids, labels = token_ids(tokenizer_file, source, target)
    start = model.config.decoder_start_token_id
    decoder_ids = np.concatenate([[start], labels[:-1]]).astype(np.int64)
    arrays = {}
    for case_name, case in CASES.items():
        handle = _hook(model, case)
        try:
            with torch.no_grad():
                out = model(input_ids=torch.from_numpy(ids)[None], decoder_input_ids=torch.from_numpy(decoder_ids)[None],
                            output_hidden_states=True, output_attentions=True)
                generated = model.generate(torch.from_numpy(ids)[None], attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                           do_sample=False, num_beams=1, max_new_tokens=12, no_repeat_ngram_size=0)
        finally:
            handle.remove()
        for name in ("encoder_hidden_states", "decoder_hidden_states", "cross_attentions"):
            arrays[f"{case_name}_{name}"] = torch.stack(getattr(out, name))[:, 0].numpy()
        arrays[f"{case_name}_logits"] = out.logits[0].numpy()
        arrays[f"{case_name}_generated"] = generated[0].numpy()
    return arrays


def main() -> None:
    sys.path.insert(0, str(HERE))
    from make_fixtures import load_eager, provenance, save_npz

    arrays = {}
    for name, class_name in NAMES.items():
        model = load_eager(FIXTURES / name, class_name)
        model.generation_config.forced_bos_token_id = None
        model.generation_config.forced_eos_token_id = None
        arrays.update({f"{name}_{k}": v for k, v in outputs(model, FIXTURES / name / "tokenizer.json").items()})
    path = FIXTURES / "hf_outputs" / "seq2seq_interventions.npz"
    save_npz(path, {**arrays, **provenance()})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
