"""The check's comparison (core/analysis/reference_check.py) on a trace against arrays made from it: equal
passes; a change over 1e-4 in one layer fails and is found in that layer; NaN fails; masked
entries equal in both count as equal; llama.cpp's logits are compared by top-1 and correlation."""
import numpy as np
import pytest

from tests.core.test_model_diff import make
from transformer_stepper.core.analysis.reference_check import check_trace, logits_agreement


@pytest.fixture(scope="module")
def trace():
    return make("gpt2").trace("the bank of the river")


def test_the_trace_against_itself_passes(trace):
    result = check_trace(trace, trace.hidden_states.copy(), trace.logits.copy(), trace.attentions.copy())
    assert result.passed and result.largest == 0.0 and result.top1_agree == 1.0
    assert [layer.index for layer in result.layers] == list(range(trace.config.n_layer + 1))
    assert result.lines()[-1].startswith("PASS")


def test_a_change_over_the_tolerance_fails_where_it_is(trace):
    hidden = trace.hidden_states.copy()
    hidden[2, 1, 3] += 2e-4
    result = check_trace(trace, hidden, trace.logits.copy())
    assert not result.passed
    assert [layer.hidden_max_abs > 1e-4 for layer in result.layers] == [False, False, True]
    assert result.largest == pytest.approx(2e-4, rel=1e-2) and result.lines()[-1].startswith("FAIL")
    hidden = trace.hidden_states.copy()
    hidden[0, 0, 0] = np.nan
    assert not check_trace(trace, hidden).passed
    with pytest.raises(ValueError, match="hidden states"):
        check_trace(trace, trace.hidden_states[:, :-1])


def test_attention_weights_are_checked_and_llama_cpp_is_correlated(trace):
    weights = trace.attentions.copy()
    weights[1, 2, 3, 0] += 3e-4
    result = check_trace(trace, trace.hidden_states.copy(), attentions=weights)
    assert not result.passed
    assert result.layers[1].attention_max_abs == 0.0
    assert result.layers[2].attention_max_abs == pytest.approx(3e-4, rel=1e-2)
    logits = trace.logits
    agreement = logits_agreement(logits, logits * 1.01 + 0.5)
    assert agreement.top1_agree == 1.0 and agreement.correlation == pytest.approx(1.0, abs=1e-9)
    assert agreement.max_abs == pytest.approx(float(np.abs(logits * 0.01 + 0.5).max()), rel=1e-5)
