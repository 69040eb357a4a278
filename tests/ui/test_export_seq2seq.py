"""`export --source --target` on an encoder–decoder: the encoder's stages and the decoder's, each
in its own folder; the decoder's prediction is read from the model's own (scaled, biased) head."""
from pathlib import Path

from PySide6.QtGui import QImage

from transformer_stepper.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_export_writes_encoder_and_decoder_stages(capsys, tmp_path):
    code = main(["export", "--model", str(FIXTURES / "marian_tiny"), "--source", "The bank of the river.",
                 "--target", "Das Ufer", "--out", str(tmp_path / "out"), "--layer", "1", "--head", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    encoder = sorted(p.name for p in (tmp_path / "out" / "encoder").iterdir())
    decoder = sorted(p.name for p in (tmp_path / "out" / "decoder").iterdir())
    assert "06-scores-scores-L1H3.png" in encoder and "06-scores-scores-L1H3.png" in decoder
    assert not any(name.startswith("12-") for name in encoder)          # no head on the encoder
    assert "12-prediction-top_tokens.png" in decoder
    assert not any(name.startswith("13-") for name in decoder) and "13-logit_lens" in err
    assert not QImage(str(tmp_path / "out" / "decoder" / "07-softmax-attention_weights-L1H3.png")).isNull()


def test_the_window_refuses_an_encoder_decoder_in_one_line():
    import pytest

    from transformer_stepper.core.model.errors import ModelError
    from transformer_stepper.state.jobs import load_and_trace

    with pytest.raises(ModelError, match=r"t5_tiny: t5 is an encoder–decoder; open it in its own "
                                         r"window with `transformer-stepper --model PATH`") as error:
        load_and_trace(str(FIXTURES / "t5_tiny"), "The bank.")
    assert "\n" not in str(error.value)
