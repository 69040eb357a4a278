"""The headless commands under hostile input (issue 25): non-finite weights (one warning, what is
finite drawn, nothing made up, no traceback), a compared word past the context, and the list of
arguments that gave tracebacks or unclear errors. Each error is one `error:` line, exit 2."""
import json
from pathlib import Path

import numpy as np
import pytest

from tests.builders import bytelevel_tokenizer, random_params, tiny_config, write_npz_model
from transformer_stepper.cli import main
from transformer_stepper.core.analysis.compare import pca_maps
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.trace.generate import Sampling, choose, distribution
from transformer_stepper.core.model.tokenize import Tokenizer


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _model(path: Path, corrupt: str = "") -> Path:
    config = tiny_config("gpt2")
    params = {name: value.copy() for name, value in random_params(config, seed=1).items()}
    if corrupt == "some":
        params["h.0.mlp.fc.w"][:, :5] = np.nan
        params["h.1.attn.q.w"][0, 0] = np.inf
    elif corrupt == "all":
        params["wte"][:] = np.nan
    return write_npz_model(path, config, params, bytelevel_tokenizer())


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile_cli")
    return {kind: _model(folder / f"{kind or 'ok'}.npz", kind) for kind in ("", "some", "all")}


# ------------------------------------------------------------------ non-finite weights
WARNING = "the forward pass produced inf or NaN (are the weights corrupt?)"


@pytest.mark.parametrize("kind", ["some", "all"])
def test_export_of_non_finite_weights_writes_every_file_and_warns_once(capsys, tmp_path, models, kind):
    code, out, err = run(capsys, "export", "--model", models[kind], "--text", "the bank of the river",
                         "--out", tmp_path / "nan")
    ok_code, ok_out, _ = run(capsys, "export", "--model", models[""], "--text", "the bank of the river",
                             "--out", tmp_path / "ok")
    assert code == ok_code == 0
    assert err.count(WARNING) == 1
    assert sorted(p.name for p in (tmp_path / "nan").iterdir()) == sorted(p.name for p in (tmp_path / "ok").iterdir())


@pytest.mark.parametrize("temperature", ["0", "1"])
def test_generate_from_non_finite_logits_makes_nothing_up(capsys, models, temperature):
    code, out, err = run(capsys, "generate", "--model", models["all"], "--text", "the bank of",
                         "--tokens", "3", "--temperature", temperature)
    assert code == 2 and out == ""
    assert error_line(err) == ("error: every next-token logit is NaN or infinite (are the weights "
                               "corrupt?); no token can be chosen")


def test_a_choice_skips_non_finite_logits():
    logits = np.array([np.nan, 1.0, np.inf, 3.0, -np.inf, 2.0], np.float32)
    assert choose(logits, Sampling(), 5) == 3                      # not the NaN, not the +Inf
    for seed in range(20):
        assert choose(logits, Sampling(temperature=1.0, seed=seed), 5) in (1, 3, 5)
    dist = distribution(logits, Sampling(temperature=1.0))
    assert np.isfinite(dist.probabilities).all() and dist.probabilities[[0, 2, 4]].tolist() == [0, 0, 0]
    with pytest.raises(ModelError):
        choose(np.full(4, np.nan, np.float32), Sampling(), 1)


def test_compare_of_non_finite_weights_maps_what_is_finite(capsys, tmp_path, models):
    for kind in ("some", "all"):
        code, out, err = run(capsys, "compare", "--model", models[kind], "--word", "bank",
                             "--text", "the bank of the river", "--text", "a bank", "--out", tmp_path / kind)
        assert code == 0, err
    pool = np.random.default_rng(0).normal(size=(2, 6, 4))
    pool[0, 2, 1] = np.nan
    pool[1] = np.inf
    coords, explained = pca_maps(pool)
    assert np.isnan(coords[0, 2]).all() and np.isfinite(np.delete(coords[0], 2, axis=0)).all()
    assert np.isnan(coords[1]).all() and explained[1].tolist() == [0, 0]


def test_compare_says_the_word_was_truncated_away(capsys, tmp_path, models):
    long = "a b " * 20 + "river"
    code, out, err = run(capsys, "compare", "--model", models[""], "--word", "river", "--text", long,
                         "--text", "a river", "--text", "the river", "--out", tmp_path / "c")
    assert code == 0
    assert "'river' is past the model's context (24 tokens): truncated away" in err
    assert "no 'river' in it" not in err


# ------------------------------------------------------------------ arguments that gave tracebacks
def test_generate_seed_and_temperature_edges(capsys, models):
    code, _, err = run(capsys, "generate", "--model", models[""], "--text", "the bank", "--tokens", "2",
                       "--temperature", "1", "--seed", "-1")
    assert code == 2 and error_line(err) == "error: seed must be a non-negative integer below 2**63, got -1"
    code, out, err = run(capsys, "generate", "--model", models[""], "--text", "the bank", "--tokens", "2",
                         "--temperature", "1e-320")
    greedy = run(capsys, "generate", "--model", models[""], "--text", "the bank", "--tokens", "2")
    assert code == 0 and out == greedy[1]      # a vanishing temperature is greedy, not NaN


def test_an_out_name_too_long_is_one_line(capsys, tmp_path):
    name = "a" * 300
    for command in (["trace", "--out", tmp_path / f"{name}.npz"], ["export", "--out", tmp_path / name]):
        code, _, err = run(capsys, command[0], "--text", "hello", *command[1:])
        assert code == 2
        assert error_line(err).endswith(f"the name is {len(Path(command[2]).name)} bytes long; "
                                        f"the file system allows 255")


def test_a_legal_long_out_name_is_written(capsys, tmp_path):
    out = tmp_path / ("b" * 251 + ".npz")            # 255 bytes: the longest legal name
    code, _, err = run(capsys, "trace", "--text", "hello", "--out", out)
    assert code == 0, err
    assert out.is_file() and [p.name for p in tmp_path.iterdir()] == [out.name]


def test_train_snapshots_zero_is_refused_not_replaced(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--out", tmp_path / "m", "--snapshots", "0")
    assert code == 2 and error_line(err) == "error: --snapshots must be at least 2, got 0"


def test_tokenizer_regex_retry_limit_is_one_line(tmp_path, capfd):
    from tokenizers import Regex
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models as hf_models
    from tokenizers import pre_tokenizers
    hf = HFTokenizer(hf_models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"(a|a)+$"), behavior="isolated")
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tokenizer = Tokenizer.from_file(path)
    with pytest.raises(ModelError) as raised:
        tokenizer.encode("a" * 60 + "!", 100)
    assert str(raised.value) == (f"{path}: could not tokenize the text (Onig: Regex search error: "
                                 f"retry-limit-in-match over)")
    out, err = capfd.readouterr()
    assert "panicked" not in err and "backtrace" not in err
    assert tokenizer.encode("a a", 100).input_ids.size      # and it still works afterwards


def test_trace_logits_are_computed_once_by_two_threads(models):
    import threading
    from transformer_stepper import load_model
    model = load_model(models[""])
    trace = model.trace("the bank of the river")
    calls, inner = [], trace._logits_of
    gate = threading.Barrier(2)

    def counted(rows):
        calls.append(rows)
        return inner(rows)

    trace._logits_of = counted
    results = []

    def read():
        gate.wait()
        results.append(trace.logits)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and results[0] is results[1]
