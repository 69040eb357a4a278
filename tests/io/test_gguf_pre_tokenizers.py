"""The split regexes a GGUF's tokenizer.ggml.pre selects (io/gguf/tokenizer.py): gpt-oss files say
"gpt-4o", whose o200k pattern splits CamelCase words, keeps a contraction on its word and digits in
threes without the space; GPT-2's pattern (any unknown name) does neither."""
from tokenizers import Regex, pre_tokenizers

from transformer_stepper.io.gguf.tokenizer import PRE_SPLITS


def _split(pattern: str, text: str) -> list[str]:
    return [piece for piece, _ in pre_tokenizers.Split(Regex(pattern), behavior="isolated").pre_tokenize_str(text)]


def test_o200k_splits_as_gpt_oss_does():
    assert _split(PRE_SPLITS["gpt-4o"], "HelloWorld's 12345 foo/bar") == \
        ["Hello", "World's", " ", "123", "45", " foo", "/bar"]
    assert _split(PRE_SPLITS["gpt-4o"], "I'M here\n\n  ok") == ["I'M", " here", "\n\n", " ", " ok"]
    assert _split(PRE_SPLITS["llama3"], "HelloWorld's") == ["HelloWorld", "'s"]
