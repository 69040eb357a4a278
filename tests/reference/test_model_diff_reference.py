"""The model diff (core/analysis/model_diff.py) against the same figures computed from Hugging Face's
arrays of both models, each run on its file's dequantized weights (relative 1e-3).

Committed tier (no torch): llama_small as F16, Q8_0 and Q4_0 (tests/fixtures/gguf, one set of
weights; the npz files hold HF's hidden states, attentions and logits): hidden-state drift and
cosine per layer, the attention divergence per head, KL(p_B || p_A) and top-1 agreement.
Live tier (torch + transformers): a 4-layer Llama written as F16, Q8_0 and Q4_K_M by the fixture
script's writer and packers, and as the fp32 HF folder they came from (a GGUF against its HF
folder); HF's q, k, v, weights, head outputs, attention output, stream after attention,
feed-forward and block output per layer, and the drift growing with depth."""
from pathlib import Path

import numpy as np
import pytest

import model_diff_helpers as ref
from reference_helpers import load_reference, reference_texts
from transformer_stepper import load_model
from transformer_stepper.core.analysis import model_diff as md

pytestmark = pytest.mark.reference
GGUF_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
RTOL = 1e-3
PAIRS = [("Q8_0", "F16"), ("Q4_0", "F16"), ("Q4_0", "Q8_0")]


@pytest.fixture(scope="module")
def small():
    return {scheme: (load_model(GGUF_DIR / f"llama_small.{scheme}.gguf"),
                     load_reference(GGUF_DIR / f"llama_small.{scheme}.npz"))
            for scheme in ("F16", "Q8_0", "Q4_0")}


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_committed_triplet_drift_equals_hugging_faces(small, pair):
    (model_a, hf_a), (model_b, hf_b) = small[pair[0]], small[pair[1]]
    for t, text in enumerate(reference_texts(hf_a)):
        diff = md.diff_traces(model_a.trace(text), model_b.trace(text), names=pair)
        ha, hb = hf_a[f"hidden_states_{t}"], hf_b[f"hidden_states_{t}"]
        doc = diff.to_json()
        assert doc["tokens"] == hf_a[f"input_ids_{t}"].tolist()
        assert doc["embedding"]["hidden_rel"] == pytest.approx(ref.rel(ha[0], hb[0]), rel=RTOL)
        for i, layer in enumerate(doc["layers"]):
            assert layer["hidden_rel"] == pytest.approx(ref.rel(ha[i + 1], hb[i + 1]), rel=RTOL), (t, i)
            assert layer["hidden_cos"] == pytest.approx(ref.cos(ha[i + 1], hb[i + 1]), rel=RTOL), (t, i)
            wa, wb = hf_a[f"attentions_{t}"][i], hf_b[f"attentions_{t}"][i]
            np.testing.assert_allclose(diff.layers[i].attention_divergence, ref.js_per_head(wa, wb), rtol=RTOL)
            assert diff.layers[i].stages["attn_weights"].relative == pytest.approx(
                ref.rel(wa, wb), rel=RTOL)
        la, lb = hf_a[f"logits_{t}"], hf_b[f"logits_{t}"]
        assert doc["output"]["kl"] == pytest.approx(ref.kl_b_a(la, lb).mean(), rel=RTOL)
        assert doc["output"]["top1_agree"] == np.mean(la.argmax(1) == lb.argmax(1))


def test_committed_coarser_quantization_drifts_more(small):
    text = reference_texts(small["F16"][1])[2]
    f16 = small["F16"][0].trace(text)
    q8 = md.diff_traces(small["Q8_0"][0].trace(text), f16)
    q4 = md.diff_traces(small["Q4_0"][0].trace(text), f16)
    assert all(a.relative < b.relative for a, b in zip(q8.hidden, q4.hidden))
    assert q8.output.kl < q4.output.kl


# ------------------------------------------------------------------ live tier: F16 / Q8_0 / Q4_K_M
TEXT = "She went to the bank to deposit money, then walked along the river bank."


@pytest.fixture(scope="module")
def triplet(tmp_path_factory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    paths = ref.write_triplet(tmp_path_factory.mktemp("llama_deep"), hf_folder=True)
    traces = {scheme: load_model(path).trace(TEXT) for scheme, path in paths.items()}
    hf = {scheme: ref.hf_activations(path, traces[scheme].input_ids) for scheme, path in paths.items()}
    return traces, hf


@pytest.mark.parametrize("scheme, against", [("Q8_0", "F16"), ("Q4_K_M", "F16"), ("F16", "HF")])
def test_every_stage_drift_equals_hugging_faces(triplet, scheme, against):
    """(F16 against HF: the GGUF against the fp32 folder it was written from.)"""
    traces, hf = triplet
    diff = md.diff_traces(traces[scheme], traces[against], names=(scheme, against))
    a, b = hf[scheme], hf[against]
    for layer in diff.layers:
        for name in md.STAGES:           # HF's q, k before the rotation: the same norms per position
            x, y = a[(name, layer.layer)], b[(name, layer.layer)]
            if name == "attn_weights":
                x, y = ref.per_query(x), ref.per_query(y)
            ours = layer.stages[name]
            assert ours.relative == pytest.approx(ref.rel(x, y), rel=RTOL), (name, layer.layer)
            assert ours.cosine == pytest.approx(ref.cos(x, y), rel=RTOL), (name, layer.layer)
        np.testing.assert_allclose(layer.attention_divergence,
                                   ref.js_per_head(a[("attn_weights", layer.layer)], b[("attn_weights", layer.layer)]),
                                   rtol=RTOL)
    hidden_hf = [ref.rel(a["hidden_states"][i], b["hidden_states"][i]) for i in range(len(diff.hidden))]
    np.testing.assert_allclose([d.relative for d in diff.hidden], hidden_hf, rtol=RTOL)
    assert diff.output.kl == pytest.approx(ref.kl_b_a(a["logits"], b["logits"]).mean(), rel=RTOL)
    assert diff.output.top1_agree == np.mean(a["logits"].argmax(1) == b["logits"].argmax(1))
    rows = np.arange(len(a["logits"]))
    rank_hf = 1 + (b["logits"] > b["logits"][rows, a["logits"].argmax(1)][:, None]).sum(1)
    np.testing.assert_array_equal(diff.output.rank_of_a_top_in_b, rank_hf)
    # the drift grows with depth, as HF computes it
    assert all(x < y for x, y in zip(hidden_hf, hidden_hf[1:])), hidden_hf


def test_q4_k_m_drifts_more_than_q8_0_everywhere(triplet):
    traces, _ = triplet
    q8 = md.diff_traces(traces["Q8_0"], traces["F16"])
    q4 = md.diff_traces(traces["Q4_K_M"], traces["F16"])
    assert np.all(q8.stage_map() < q4.stage_map())
    assert q8.output.kl < q4.output.kl
