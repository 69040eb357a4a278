"""The encoder–decoder reference fixtures (T5 v1.0 / v1.1, BART, mBART, Marian), written by
`python tests/make_fixtures.py --seq2seq-only` (or as part of the full run).

Each config copies the fields of a real checkpoint (t5-small, google/flan-t5-small,
facebook/bart-base, facebook/mbart-large-cc25, Helsinki-NLP/opus-mt-en-de) with the sizes
scaled down; every parameter is redrawn (make_fixtures._randomize). Per (source, target) pair
t the npz holds: source_t, target_t, input_ids_t (the source's ids), labels_t (text_target's
ids), decoder_input_ids_t (labels shifted right after decoder_start_token_id),
encoder_hidden_states_t, encoder_attentions_t, decoder_hidden_states_t, decoder_attentions_t,
cross_attentions_t, logits_t (batch dimension dropped); and generated_ids_0: greedy
`generate` from source 0 with an explicit attention mask, at most 12 new tokens, stopping at EOS.
The tokenizers are `tokenizers`-library files built here (T5/Marian/mBART: SentencePiece-style
BPE with `$A </s>`; BART: byte-level BPE with `<s> $A </s>`), read by transformers as
PreTrainedTokenizerFast; their ids for text and text_target are checked equal to the library's.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

PAIRS = (
    ("The bank of the river.", "Das Ufer des Flusses."),
    ("She went to the bank to deposit money.", "Sie ging zur Bank."),
    ("Ünïcödé café — ☕ 日本!", "Café!"),
)
CORPUS = tuple(s for pair in PAIRS for s in pair) + (
    "He walked along the river bank until the sun set behind the hills.",
    "Er ging am Ufer entlang, bis die Sonne hinter den Hügeln unterging.",
    "The old man counted his money at the bank in the city.",
)
SIZES = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
             max_position_embeddings=64)


def metaspace_tokenizer(specials, post: str = "$A </s>", pad_last: bool = False):
    """SentencePiece-style BPE ('▁' word starts) ending each text with </s> (T5, Marian)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=list(specials), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    if pad_last:                      # Marian: <pad> is the last id
        tok.add_special_tokens(["<pad>"])
    specials_used = [(t, tok.token_to_id(t)) for t in ("<s>", "</s>") if f"{t} " in post + " " or f" {t}" in post]
    tok.post_processor = processors.TemplateProcessing(single=post, pair=post + " $B",
                                                       special_tokens=specials_used)
    return tok


def bart_tokenizer():
    from make_fixtures import ROBERTA_SPECIALS, bytelevel_tokenizer

    return bytelevel_tokenizer(ROBERTA_SPECIALS, roberta=True)


def seq2seq_configs():
    """name -> (HF class, config class, config fields (vocab_size added), tokenizer factory)."""
    t5 = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
              relative_attention_num_buckets=8, relative_attention_max_distance=20,
              layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    t5_tok = lambda: metaspace_tokenizer(("<pad>", "</s>", "<unk>"))          # noqa: E731
    no_forcing = dict(forced_bos_token_id=None, forced_eos_token_id=None)
    return {
        # t5-small (v1.0): ReLU, tied head (h · d_model^-0.5)
        "t5_tiny": ("T5ForConditionalGeneration", "T5Config",
                    dict(t5, feed_forward_proj="relu", tie_word_embeddings=True), t5_tok),
        # google/flan-t5-small (v1.1): gated-gelu, untied lm_head
        "t5_v11_tiny": ("T5ForConditionalGeneration", "T5Config",
                        dict(t5, feed_forward_proj="gated-gelu", tie_word_embeddings=False),
                        t5_tok),
        # facebook/bart-base: post-LN, layernorm_embedding, positions offset 2, gelu
        "bart_tiny": ("BartForConditionalGeneration", "BartConfig",
                      dict(SIZES, activation_function="gelu", scale_embedding=False, pad_token_id=1,
                           bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, **no_forcing),
                      bart_tokenizer),
        # facebook/mbart-large-cc25: pre-LN + final layer_norm, scale_embedding
        "mbart_tiny": ("MBartForConditionalGeneration", "MBartConfig",
                       dict(SIZES, activation_function="gelu", scale_embedding=True, pad_token_id=1,
                            bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, **no_forcing),
                       lambda: metaspace_tokenizer(("<s>", "<pad>", "</s>", "<unk>"))),
        # Helsinki-NLP/opus-mt-en-de: sinusoidal, embeddings × √d, swish, <pad> last = start
        "marian_tiny": ("MarianMTModel", "MarianConfig",
                        dict(SIZES, activation_function="swish", scale_embedding=True,
                             eos_token_id=0, share_encoder_decoder_embeddings=True, **no_forcing),
                        lambda: metaspace_tokenizer(("</s>", "<unk>"), pad_last=True)),
    }


def token_ids(tokenizer_file: Path, source: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    """(source ids, text_target ids) from transformers' fast tokenizer, checked against the
    `tokenizers` library's."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file))
    batch = hf(source, text_target=target)
    lib = Tokenizer.from_file(str(tokenizer_file))
    for text, ids in ((source, batch["input_ids"]), (target, batch["labels"])):
        if list(ids) != lib.encode(text).ids:
            raise SystemExit(f"{tokenizer_file}: transformers and tokenizers disagree on {text!r}")
    return np.asarray(batch["input_ids"], np.int64), np.asarray(batch["labels"], np.int64)


def seq2seq_outputs(model, tokenizer_file: Path) -> dict[str, np.ndarray]:
    import torch

    start = model.config.decoder_start_token_id
    arrays: dict[str, np.ndarray] = {}
    for t, (source, target) in enumerate(PAIRS):
        ids, labels = token_ids(tokenizer_file, source, target)
        decoder_ids = np.concatenate([[start], labels[:-1]]).astype(np.int64)
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids)[None],
                        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                        decoder_input_ids=torch.from_numpy(decoder_ids)[None],
                        output_hidden_states=True, output_attentions=True)
        arrays.update({f"source_{t}": np.array(source), f"target_{t}": np.array(target),
                       f"input_ids_{t}": ids, f"labels_{t}": labels,
                       f"decoder_input_ids_{t}": decoder_ids, f"logits_{t}": out.logits[0].numpy()})
        for name in ("encoder_hidden_states", "encoder_attentions", "decoder_hidden_states",
                     "decoder_attentions", "cross_attentions"):
            arrays[f"{name}_{t}"] = torch.stack(getattr(out, name))[:, 0].numpy()
    ids = torch.from_numpy(arrays["input_ids_0"])[None]
    with torch.no_grad():
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                   num_beams=1, max_new_tokens=12, no_repeat_ngram_size=0)
    arrays["generated_ids_0"] = generated[0].numpy()
    return arrays


def make_seq2seq(name: str, out: Path, seed: int) -> None:
    from make_fixtures import load_eager, provenance, save_npz, write_random_model

    class_name, config_name, fields, make_tokenizer = seq2seq_configs()[name]
    tok = make_tokenizer()
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    fields = dict(fields, vocab_size=vocab_size)
    if name == "marian_tiny":
        pad = tok.token_to_id("<pad>")
        fields.update(pad_token_id=pad, decoder_start_token_id=pad, decoder_vocab_size=vocab_size)
    folder = write_random_model(out / name, class_name, config_name, fields, tok, seed)
    model = load_eager(folder, class_name)
    model.generation_config.forced_bos_token_id = None
    model.generation_config.forced_eos_token_id = None
    arrays = seq2seq_outputs(model, folder / "tokenizer.json")
    save_npz(out / "hf_outputs" / f"{name}.npz", {**arrays, **provenance()})


def make_all(out: Path, seed: int) -> None:
    for offset, name in enumerate(seq2seq_configs()):
        make_seq2seq(name, out, seed + offset)
        print(f"wrote {out / name} and hf_outputs/{name}.npz")
