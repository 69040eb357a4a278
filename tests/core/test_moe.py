"""The mixture-of-experts feed-forward (core/model/moe.py): the router's top-k and gates, each token
through its chosen experts only, the weighted sum and the shared expert, checked against a
brute force that runs every expert on every token; the lazily recomputed layer equals the
pass's recording; only the experts some token is routed to are read."""
from __future__ import annotations

import numpy as np
import pytest

from tests.builders import bytelevel_tokenizer, random_params, tiny_config, wrap
from tests.core.test_lazy_trace import eager_recording
from transformer_stepper.core.model import moe
from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.forward import forward
from transformer_stepper.core.trace.model import Model

TEXT = "the bank of the river and the bank of money"


def moe_config(**changes) -> ModelConfig:
    fields = dict(n_expert=6, n_expert_used=2, d_expert=16, norm_topk=True)
    fields.update(changes)
    return tiny_config("llama", **fields)


def moe_model(seed: int = 0, **changes) -> Model:
    config = moe_config(**changes)
    params = random_params(config, seed)
    for layer in range(config.n_layer):           # a sharper router: tokens disagree
        name = f"h.{layer}.moe.router.w"
        if name in params:
            params[name] = params[name] * np.float32(8)
    return Model(config, params, wrap(bytelevel_tokenizer()), source="tiny-moe")


def _softmax64(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_top_k_takes_the_largest_probabilities_and_normalises_them():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(9, 7)).astype(np.float32) * 3
    probs = moe.router_probs(logits)
    np.testing.assert_allclose(probs.sum(axis=-1), 1, atol=1e-6)
    ids, gates = moe.top_k(probs, 3, normalize=False)
    for row in range(9):
        assert list(ids[row]) == list(np.argsort(-_softmax64(logits[row]))[:3])
    np.testing.assert_allclose(gates, np.take_along_axis(_softmax64(logits), ids, axis=-1), atol=1e-6)
    assert (gates.sum(axis=-1) < 1).all()
    _, normalised = moe.top_k(probs, 3, normalize=True)
    np.testing.assert_allclose(normalised.sum(axis=-1), 1, atol=1e-6)
    np.testing.assert_allclose(normalised, gates / gates.sum(axis=-1, keepdims=True), atol=1e-6)
    assert ids.dtype == np.int64 and gates.dtype == np.float32


def _brute_force(params, config, x, layer):
    """Every expert on every token (float64), then each token's top-k mixture."""
    x64 = x.astype(np.float64)
    p = f"h.{layer}.moe."

    def expert(prefix):
        gate = x64 @ params[prefix + "gate.w"]
        return ((gate / (1 + np.exp(-gate))) * (x64 @ params[prefix + "up.w"])) @ params[prefix + "proj.w"]

    probs = _softmax64(x64 @ params[p + "router.w"])
    every = np.stack([expert(f"{p}expert.{e}.") for e in range(config.n_expert)])   # [E, n, d]
    ids = np.argsort(-probs, axis=-1)[:, :config.n_expert_used]
    gates = np.take_along_axis(probs, ids, axis=-1)
    if config.norm_topk:
        gates /= gates.sum(axis=-1, keepdims=True)
    out = sum(gates[:, s, None] * every[ids[:, s], np.arange(len(x))] for s in range(ids.shape[1]))
    if config.d_shared_expert:
        out = out + expert(p + "shared.") / (1 + np.exp(-(x64 @ params[p + "shared_gate.w"])))
    return ids, gates, every, out


@pytest.mark.parametrize("changes", [{}, {"norm_topk": False}, {"d_shared_expert": 24, "norm_topk": False},
                                     {"n_expert_used": 1}, {"n_expert_used": 6}])
def test_the_mixture_equals_every_expert_on_every_token(changes):
    model = moe_model(**changes)
    config = model.config
    trace = model.trace(TEXT)
    for layer in range(config.n_layer):
        x = trace.layer("mlp_in", layer)
        ids, gates, every, out = _brute_force(model.params, config, x, layer)
        np.testing.assert_array_equal(trace.layer("expert_ids", layer), ids)
        np.testing.assert_allclose(trace.layer("expert_gates", layer), gates, atol=1e-6)
        outputs = trace.layer("expert_outputs", layer)               # [k, n, d]: slot-major
        assert outputs.shape == (config.n_expert_used, trace.n_seq, config.d_model)
        for slot in range(config.n_expert_used):
            np.testing.assert_allclose(outputs[slot], every[ids[:, slot], np.arange(trace.n_seq)], atol=1e-5)
        np.testing.assert_allclose(trace.layer("mlp_out", layer), out, atol=1e-5)
        assert trace.layer("router_logits", layer).shape == (trace.n_seq, config.n_expert)
    sets = {tuple(sorted(row)) for row in trace.layer("expert_ids", 0)}
    assert config.n_expert_used == config.n_expert or len(sets) > 2     # tokens go different ways


def test_dense_layers_keep_the_dense_feed_forward():
    model = moe_model(dense_layers=(1,))
    trace = model.trace(TEXT)
    assert "h.1.mlp.gate.w" in model.params and "h.1.moe.router.w" not in model.params
    assert "mlp_pre_act" in trace.detail(1) and "expert_outputs" not in trace.detail(1)
    for name in ("router_logits", "expert_ids", "expert_gates"):      # no router: empty rows
        assert trace.layer(name, 1).shape == (trace.n_seq, 0)
    assert trace.layer("router_logits", 0).shape == (trace.n_seq, 6)


def test_recomputed_layers_equal_the_pass_and_traced_equals_untraced():
    model = moe_model(d_shared_expert=24)
    _, per_layer = eager_recording(model, TEXT)
    trace = model.trace(TEXT, detail_budget=0)
    for layer in range(model.config.n_layer):
        for name in ("router_logits", "router_probs", "expert_ids", "expert_gates", "expert_outputs",
                     "shared_expert_out", "shared_expert_gate", "mlp_out"):
            assert trace.layer(name, layer).tobytes() == per_layer[name][layer].tobytes(), (name, layer)
    ids = model.encode(TEXT).input_ids
    plain = forward(model.params, model.config, np.asarray(ids))
    np.testing.assert_array_equal(plain["logits"][-1], trace.logits[-1])


class CountingParams(dict):
    def __init__(self, params):
        super().__init__(params)
        self.read: set[str] = set()

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)


def test_only_the_routed_experts_are_read():
    model = moe_model(n_expert=6, n_expert_used=1)
    counting = CountingParams(model.params)
    ids = np.asarray(model.encode("the").input_ids)
    forward(counting, model.config, ids)
    for layer in range(model.config.n_layer):
        read = {n.split(".")[4] for n in counting.read if n.startswith(f"h.{layer}.moe.expert.")}
        assert 1 <= len(read) <= len(ids) < model.config.n_expert


def test_expert_load_counts_every_choice():
    ids = np.array([[0, 2], [2, 1], [2, 0]])
    assert moe.load(ids, 4).tolist() == [2, 1, 3, 0]
    assert moe.load(ids, 4, rows=np.array([1])).tolist() == [0, 1, 1, 0]


@pytest.mark.parametrize("changes, message", [
    ({"n_expert_used": 7}, "n_expert_used=7 must be between 1 and n_expert=6"),
    ({"n_expert": 0, "n_expert_used": 2}, "need n_expert"),
    ({"dense_layers": (5,)}, "dense_layers must be increasing layer indices"),
])
def test_bad_expert_configs_are_refused(changes, message):
    with pytest.raises(ModelError, match=message):
        moe_config(**changes)


def test_the_router_stage_function_reproduces_the_trace():
    from transformer_stepper.core.model import stages

    model = moe_model()
    trace = model.trace(TEXT)
    route = stages.stage("router").compute_function()
    for layer in range(model.config.n_layer):
        logits, probs, ids, gates = route(model.params, model.config, trace.layer("mlp_in", layer), layer)
        for name, value in (("router_logits", logits), ("router_probs", probs), ("expert_ids", ids),
                            ("expert_gates", gates)):
            assert value.tobytes() == trace.layer(name, layer).tobytes(), name


def test_router_numbering_keeps_dense_models_as_they_were():
    from transformer_stepper.core.model import stages

    dense, mixture = tiny_config("llama"), moe_config()
    router, ffn, lens = stages.stage("router"), stages.stage("feed_forward"), stages.stage("logit_lens")
    assert not router.available(dense) and router.available(mixture)
    assert [s.number_for(dense) for s in stages.available_stages(dense)] == list(range(1, 14))
    assert [s.number_for(mixture) for s in stages.available_stages(mixture)] == list(range(1, 15))
    assert (router.number_for(mixture), ffn.number_for(mixture), lens.number_for(mixture)) == (10, 11, 14)
    walk, here = [], ("qkv", 0)
    while here is not None:
        walk.append(here)
        here = stages.step(*here, 1, mixture)
    assert walk[walk.index(("output_projection", 0)) + 1:][:2] == [("router", 0), ("feed_forward", 0)]
    assert ("router", 0) not in _walk(dense)


def _walk(config):
    from transformer_stepper.core.model import stages

    walk, here = [], ("qkv", 0)
    while here is not None:
        walk.append(here)
        here = stages.step(*here, 1, config)
    return walk


def test_load_path_and_readout():
    from transformer_stepper.core.analysis import moe_readouts

    model = moe_model(dense_layers=(1,), d_shared_expert=24, norm_topk=False)
    trace = model.trace(TEXT, detail_budget=0)
    token = 3
    load = moe_readouts.expert_load(trace, token)
    assert load.moe_layers.tolist() == [True, False]
    assert load.counts[0].sum() == trace.n_seq * 2 and load.counts[1].sum() == 0
    assert (load.path[1] == -1).all() and np.isnan(load.path_gates[1]).all()
    ids = trace.layer("expert_ids", 0)
    assert load.path[0].tolist() == ids[token].tolist()
    for e in range(model.config.n_expert):
        assert load.counts[0, e] == sum(e in row for row in ids.tolist())
    matrix = moe_readouts.gate_matrix(ids, trace.layer("expert_gates", 0), model.config.n_expert)
    assert (np.count_nonzero(matrix, axis=1) == 2).all()
    np.testing.assert_array_equal(matrix[token, ids[token]], trace.layer("expert_gates", 0)[token])
    readout = moe_readouts.router_readout(trace, 0, token)
    probs = trace.layer("router_probs", 0)[token]
    assert readout.experts == tuple(ids[token]) and not readout.normalised
    assert readout.gates == pytest.approx(tuple(probs[ids[token]]))
    assert readout.chosen_mass == pytest.approx(float(probs[ids[token]].sum()))
    assert 0 < readout.shared_gate < 1
    assert readout.busiest_count == load.counts[0].max() and readout.unused == int((load.counts[0] == 0).sum())


@pytest.mark.parametrize("edit, message", [
    ("DisableExpert(5, 0)", "layer 5 is out of range"),
    ("DisableExpert(1, 0)", "layer 1 has no experts"),
    ("DisableExpert(0, 6)", "expert 6 is out of range"),
    ("ForceExpert(0, 99, 1)", "position 99 is outside the text's"),
])
def test_bad_expert_interventions_are_refused(edit, message):
    from transformer_stepper import DisableExpert, ForceExpert  # noqa: F401  (eval)

    model = moe_model(dense_layers=(1,))
    with pytest.raises(ModelError, match=message):
        model.trace(TEXT, interventions=[eval(edit)])


def test_disabling_an_expert_reroutes_only_its_tokens():
    from transformer_stepper import DisableExpert

    model = moe_model()
    clean = model.trace(TEXT)
    ids = clean.layer("expert_ids", 0)
    busiest = int(np.bincount(ids.ravel()).argmax())
    edited = model.intervene(clean, [DisableExpert(0, busiest)])
    new_ids = edited.layer("expert_ids", 0)
    assert busiest not in new_ids
    untouched = ~(ids == busiest).any(axis=1)
    assert untouched.any() and (~untouched).any()
    np.testing.assert_array_equal(new_ids[untouched], ids[untouched])
    # (equal up to rounding: an expert given other rows multiplies a matrix of another shape)
    np.testing.assert_allclose(edited.layer("mlp_out", 0)[untouched], clean.layer("mlp_out", 0)[untouched], atol=1e-6)
    assert not np.allclose(edited.layer("mlp_out", 0)[~untouched], clean.layer("mlp_out", 0)[~untouched])


def test_expert_interventions_survive_a_session_file(tmp_path):
    from transformer_stepper import DisableExpert, ForceExpert
    from transformer_stepper.io.session_file import SessionData, read_session, to_json

    edits = (DisableExpert(2, 5), ForceExpert(0, 3, 7))
    path = tmp_path / "s.stepper"
    path.write_text(to_json(SessionData(None, "m", "builtin", "a text", interventions=edits)))
    assert read_session(path).interventions == edits


def test_provenance_names_the_experts_and_gates():
    from transformer_stepper.core.analysis.provenance.explain import explain

    model = moe_model(d_shared_expert=24)
    trace = model.trace(TEXT)
    i, c = 4, 7
    e = explain(model, trace, "mlp_out", (0, i, c))
    ids, gates = trace.layer("expert_ids", 0)[i], trace.layer("expert_gates", 0)[i]
    assert [t.label.split(":")[0] for t in e.terms[:2]] == [f"E{ids[0]}", f"E{ids[1]}"]
    assert e.terms[-1].label.startswith("shared expert")
    assert e.matches(1e-5) and f"E{ids[0]} (gate {gates[0]:.4f})" in e.notes[0]
    scope = {"model": model, "trace": trace}
    exec(e.python, scope)
    assert scope["value"] == pytest.approx(e.traced, abs=1e-5)
    for name, index in (("router_logits", (0, i, 3)), ("expert_gates", (0, i, 1))):
        explained = explain(model, trace, name, index)
        assert explained.matches(1e-5), name
        scope = {"model": model, "trace": trace}
        exec(explained.python, scope)
        assert scope["value"] == pytest.approx(explained.traced, abs=1e-5)
    dense = moe_model(dense_layers=(1,))
    assert explain(dense, dense.trace(TEXT), "mlp_out", (1, 2, 3)).formula.startswith("out[c] = h · W_down")


def test_whole_trace_arrays_with_dense_layers():
    mixed = moe_model(dense_layers=(1,)).trace(TEXT)
    arrays = mixed.to_dict()
    assert arrays["expert_ids_layer0"].shape == (mixed.n_seq, 2) and "expert_ids_layer1" not in arrays
    assert arrays["mlp_gated_layer1"].shape == (mixed.n_seq, 48) and "mlp_gated_layer0" not in arrays
    assert arrays["mlp_out"].shape == (2, mixed.n_seq, 32)          # every layer has it alike
    with pytest.raises(KeyError, match="differs between this mixture-of-experts model's routed and dense"):
        mixed["expert_outputs"]
    routed = moe_model().trace(TEXT)
    assert routed["expert_outputs"].shape == (2, 2, routed.n_seq, 32)
