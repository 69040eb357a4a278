"""The shipped translator (resources/translator/, `train --recipe translator`) opens through the
Marian loader, translates fresh held-out pairs (generated with a seed the training never used)
exactly, and its cross-attention has a head that looks at the aligned source word."""
import numpy as np

from transformer_stepper.core.training import translation_corpus as corpus
from transformer_stepper.core.training.translator import evaluate
from transformer_stepper.io.loader import load_model
from transformer_stepper.io.resources import builtin_translator_dir


def test_the_shipped_translator_translates_and_aligns():
    model = load_model(str(builtin_translator_dir()))
    assert model.config.family == "marian" and model.config.encoder.position == "learned"
    size = sum(p.stat().st_size for p in builtin_translator_dir().iterdir())
    assert size < 5 * 2**20
    seen = {p.source_text for p in corpus.generate(20000, 0)}
    fresh = [p for p in corpus.generate(200, seed=424242) if p.source_text not in seen][:40]
    result = evaluate(model, fresh)
    assert result["exact_match"] >= 0.95
    share = np.asarray(result["alignment_share"])
    assert share.shape == (2, 4) and share.max() > 0.5
