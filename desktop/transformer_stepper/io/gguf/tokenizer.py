"""A `tokenizers.Tokenizer` built from a GGUF file's `tokenizer.ggml.*` metadata, the pipeline
Hugging Face builds for the same file (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`):

  model "gpt2"   byte-level BPE with the file's merges; the split regex named by
                 tokenizer.ggml.pre (llama-bpe, qwen2 ...) before the byte-level step
  model "llama"  SentencePiece-style BPE with byte fallback and a "▁" prefix on the first word;
                 merges from the file, or recovered from the token scores when it has none
                 (Gemma files: from the token order, spaces spelled "▁")
Control tokens (type 3) become special added tokens, user-defined ones (type 4) plain added
tokens; BOS/EOS are added as tokenizer.ggml.add_bos_token / add_eos_token say."""
from __future__ import annotations

import json

from ...core.model.errors import ModelError
from ...core.model.tokenize import Tokenizer

CONTROL, USER_DEFINED = 3, 4

_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k (gpt-oss, GPT-4o): tiktoken's o200k_base pattern, llama.cpp's "gpt-4o" pre-tokenizer
_O200K_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# tokenizer.ggml.pre -> the split regex (names as llama.cpp writes them); any other name keeps
# GPT-2's own byte-level regex, as Hugging Face does
PRE_SPLITS = {name: _LLAMA3_SPLIT for name in ("llama3", "llama-v3", "llama-bpe", "falcon3",
                                               "smaug-bpe", "dbrx", "pixtral", "lfm2")}
PRE_SPLITS.update({name: _QWEN2_SPLIT for name in ("qwen2", "deepseek-r1-qwen", "megrez")})
PRE_SPLITS["gpt-4o"] = _O200K_SPLIT


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def generate_merges(vocab: dict[str, int], scores: dict[str, float]) -> list[list[str]]:
    """Merges implied by a vocabulary: every split of a token into two known tokens, best
    score first (ties: shorter left piece, then shorter right piece)."""
    merges = []
    for merge, score in scores.items():
        local = [(merge[:i], merge[i:], score) for i in range(1, len(merge))
                 if merge[:i] in vocab and merge[i:] in vocab]
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda v: (v[2], len(v[0]), len(v[1])), reverse=True)
    return [[left, right] for left, right, _ in merges]


def _added(token_id: int, content: str, special: bool) -> dict:
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": special}


def _added_tokens(tokens: list[str], types: list[int], vocab: dict[str, int],
                  byte_level: bool, defaults: tuple[str, ...]) -> list[dict]:
    alphabet = set(bytes_to_unicode().values()) if byte_level else None
    added: dict[int, dict] = {}
    for name in defaults:  # the special tokens HF's tokenizer class declares itself
        if name in vocab:
            added[vocab[name]] = _added(vocab[name], name, True)
    for token, kind in zip(tokens, types):
        if kind == CONTROL and (alphabet is None or set(token) <= alphabet):
            added.setdefault(vocab[token], _added(vocab[token], token, True))
    for token, kind in zip(tokens, types):
        if kind == USER_DEFINED and token in vocab:
            added.setdefault(vocab[token], _added(vocab[token], token, False))
    return [added[i] for i in sorted(added)]


def _post_processor(gguf, tokens: list[str], add_bos: bool) -> dict:
    source = gguf.path
    single, specials = [{"Sequence": {"id": "A", "type_id": 0}}], {}
    pieces = []
    for key, add, where in (("bos", add_bos, 0),
                            ("eos", bool(gguf.value("tokenizer.ggml.add_eos_token", False)), 1)):
        if not add:
            continue
        token_id = gguf.value(f"tokenizer.ggml.{key}_token_id")
        if token_id is None or not 0 <= int(token_id) < len(tokens):
            raise ModelError(f"{source}: tokenizer.ggml.add_{key}_token is set but "
                             f"tokenizer.ggml.{key}_token_id is {token_id!r}")
        content = tokens[int(token_id)]
        pieces.append((where, {"SpecialToken": {"id": content, "type_id": 0}}))
        specials[content] = {"id": content, "ids": [int(token_id)], "tokens": [content]}
    for where, piece in pieces:
        single = [piece] + single if where == 0 else single + [piece]
    return {"type": "TemplateProcessing", "single": single, "pair": single + [
        {"Sequence": {"id": "B", "type_id": 1}}], "special_tokens": specials}


def _byte_level(gguf, tokens, types) -> dict:
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    vocab = {}
    for index, token in enumerate(tokens):
        spelled = token if set(token) <= alphabet else "".join(spelling[b] for b in token.encode("utf-8"))
        vocab.setdefault(spelled, index)
    merges = gguf.value("tokenizer.ggml.merges")
    if merges is None:
        raise ModelError(f"{gguf.path}: GGUF metadata has no 'tokenizer.ggml.merges' (a byte-level "
                         f"BPE needs them)")
    pre = gguf.value("tokenizer.ggml.pre", "default")
    split = PRE_SPLITS.get(pre)
    if split is None:
        pre_tokenizer = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                         "use_regex": True}
    else:
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    return {"normalizer": None, "pre_tokenizer": pre_tokenizer,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                      "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                      "merges": [m.split(" ", 1) for m in merges]},
            "added_tokens": _added_tokens(list(vocab), [types[i] for i in vocab.values()], vocab,
                                          True, ("<|endoftext|>",))}


def _sentencepiece(gguf, tokens, types, variant: str) -> dict:
    gemma = variant == "gemma"
    if gemma:  # runs of spaces are stored as spaces; the model looks them up as "▁"
        tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
    vocab = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    merges = gguf.value("tokenizer.ggml.merges")
    if merges is not None:
        merge_list = [m.split(" ", 1) for m in merges]
    elif gemma:  # Gemma's scores do not follow its merge order; the token order does
        merge_list = generate_merges(vocab, {t: -i for i, t in enumerate(tokens)})
    else:
        scores = gguf.value("tokenizer.ggml.scores")
        if scores is None:
            raise ModelError(f"{gguf.path}: GGUF metadata has neither tokenizer.ggml.merges nor "
                             f"tokenizer.ggml.scores")
        merge_list = generate_merges(vocab, dict(zip(tokens, (float(s) for s in scores))))
    decoders = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]
    if gemma:
        normalizer = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
        pre_tokenizer = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                         "invert": False}
        defaults = ("<unk>", "<bos>", "<eos>", "<pad>", "<mask>")
    else:
        normalizer = None
        pre_tokenizer = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                         "split": False}
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
        defaults = ("<unk>", "<s>", "</s>")
    return {"normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "decoder": {"type": "Sequence", "decoders": decoders},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>" if gemma else None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": vocab, "merges": merge_list},
            "added_tokens": _added_tokens(tokens, types, vocab, False, defaults)}


def tokenizer_from_gguf(gguf, sentencepiece: str = "llama") -> Tokenizer:
    """The file's tokenizer; a kind Hugging Face does not build is refused in one line."""
    kind = gguf.value("tokenizer.ggml.model", required=True)
    tokens = gguf.value("tokenizer.ggml.tokens", required=True)
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise ModelError(f"{gguf.path}: tokenizer.ggml.tokens is not a list of strings")
    types = gguf.value("tokenizer.ggml.token_type") or [1] * len(tokens)
    if len(types) != len(tokens):
        raise ModelError(f"{gguf.path}: tokenizer.ggml.token_type has {len(types)} entries for "
                         f"{len(tokens)} tokens")
    types = [int(t) for t in types]
    if kind == "gpt2":
        body = _byte_level(gguf, tokens, types)
        add_bos = bool(gguf.value("tokenizer.ggml.add_bos_token", False))
    elif kind == "llama":
        body = _sentencepiece(gguf, tokens, types, sentencepiece)
        add_bos = bool(gguf.value("tokenizer.ggml.add_bos_token", True))
    else:
        raise ModelError(f"{gguf.path}: tokenizer.ggml.model {kind!r} is not built (gpt2 and "
                         f"llama are)")
    document = {"version": "1.0", "truncation": None, "padding": None,
                "post_processor": _post_processor(gguf, tokens, add_bos), **body}
    return Tokenizer.from_json(json.dumps(document), f"{gguf.path} (tokenizer.ggml.*)")
