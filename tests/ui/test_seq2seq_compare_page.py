"""The translation window's Compare (encoder) page: the Compare view over the encoder of the
window's model; its cosines are the encoder's (compare_source), and it follows the layer."""
from pathlib import Path

import numpy as np

from transformer_stepper.core.analysis.seq2seq_compare import compare_source
from transformer_stepper.ui.seq2seq.window import TranslationWindow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_compare_on_the_encoder_side(qtbot):
    w = TranslationWindow("The bank of the river.")
    qtbot.addWidget(w)
    w.open_model(str(FIXTURES / "marian_tiny"))
    qtbot.waitUntil(lambda: w.trace is not None, timeout=10000)
    w.show()
    w.open_cell("", "compare", None, None)
    page = w.compare_page
    assert w.pages.currentWidget() is page and page.session.model.name.endswith("(encoder)")
    texts = ["The bank of the river.", "She went to the bank to deposit money."]
    page.view.word_box.setText("bank")
    page.view.state.load("bank", texts)
    qtbot.waitUntil(lambda: page.view.state.comparison is not None
                    and len(page.view.state.comparison.occurrences) == 2, timeout=20000)
    expected = compare_source(w.model, texts, "bank")
    np.testing.assert_allclose(page.view.state.comparison.pair_cosines, expected.pair_cosines, atol=1e-6)
    w.layer_box.setValue(1)
    assert page.session.layer == 1
    w.close()
