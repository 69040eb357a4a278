"""`trace` and `generate` with --source/--target on an encoder–decoder."""
from pathlib import Path

import numpy as np

from transformer_stepper.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_prints_hf_greedy_translation(capsys, tmp_path):
    ref = np.load(FIXTURES / "hf_outputs" / "marian_tiny.npz")
    code, out, err = run(capsys, "generate", "--model", FIXTURES / "marian_tiny",
                         "--source", str(ref["source_0"]), "--tokens", 12, "--trace", tmp_path / "g.npz")
    assert code == 0, err
    saved = np.load(tmp_path / "g.npz")
    np.testing.assert_array_equal(saved["decoder_input_ids"], ref["generated_ids_0"])
    assert saved["cross_attentions"].shape[2:] == (len(ref["generated_ids_0"]), len(ref["input_ids_0"]))
    assert out.strip() and "Traceback" not in err


def test_trace_with_a_target_writes_hf_named_arrays(capsys, tmp_path):
    ref = np.load(FIXTURES / "hf_outputs" / "bart_tiny.npz")
    code, out, err = run(capsys, "trace", "--model", FIXTURES / "bart_tiny", "--source",
                         str(ref["source_1"]), "--target", str(ref["target_1"]), "--out", tmp_path / "t.npz")
    assert code == 0, err
    saved = np.load(tmp_path / "t.npz", allow_pickle=False)
    for name in ("encoder_hidden_states", "decoder_hidden_states", "cross_attentions", "logits"):
        np.testing.assert_allclose(saved[name], ref[f"{name}_1"], atol=1e-4, rtol=0)


def test_source_on_a_one_stack_model_and_no_text_are_one_line_errors(capsys, tmp_path):
    code, _, err = run(capsys, "trace", "--model", FIXTURES / "gpt2_tiny", "--source", "Hi",
                       "--out", tmp_path / "t.npz")
    assert code == 2 and err.count("\n") == 1 and "use --text" in err
    code, _, err = run(capsys, "generate", "--model", FIXTURES / "t5_tiny")
    assert code == 2 and err.startswith("error: give the text")
    code, _, err = run(capsys, "generate", "--model", FIXTURES / "t5_tiny", "--source", " ")
    assert code == 2 and err == "error: empty source: type a sentence to translate\n"


def test_trace_with_an_ablated_cross_head_writes_hugging_faces_hooked_arrays(capsys, tmp_path):
    ref = np.load(FIXTURES / "hf_outputs" / "seq2seq_interventions.npz")
    clean = np.load(FIXTURES / "hf_outputs" / "marian_tiny.npz")
    code, out, err = run(capsys, "trace", "--model", FIXTURES / "marian_tiny", "--source",
                         str(clean["source_0"]), "--target", str(clean["target_0"]), "--ablate", "cross:1:2",
                         "--out", tmp_path / "t.npz")
    assert code == 0, err
    saved = np.load(tmp_path / "t.npz", allow_pickle=False)
    np.testing.assert_allclose(saved["logits"], ref["marian_tiny_cross_1_2_logits"], atol=1e-4, rtol=0)
    cross_row = next(line for line in out.splitlines() if line.strip().startswith("Cross-attention"))
    assert cross_row.split()[1:] == ["0", cross_row.split()[2]] and cross_row.split()[2].endswith("%")


def test_generate_with_an_intervention_prints_both_translations(capsys):
    ref = np.load(FIXTURES / "hf_outputs" / "seq2seq_interventions.npz")
    clean = np.load(FIXTURES / "hf_outputs" / "t5_tiny.npz")
    code, out, err = run(capsys, "generate", "--model", FIXTURES / "t5_tiny", "--source", str(clean["source_0"]),
                         "--tokens", 12, "--no-source-positions")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("clean: ") and lines[1].startswith("intervened: ")
    assert "[no source positions]" in lines[1]
    from transformer_stepper.io.loader import load_model
    tok = load_model(FIXTURES / "t5_tiny").target_tokenizer
    ids = [int(i) for i in ref["t5_tiny_no_source_positions_generated"][1:] if i != 1]
    assert lines[1].split("   [")[0] == "intervened: " + "".join(tok.continuation([], ids)).strip()


def test_ablate_on_a_one_stack_model_is_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "trace", "--model", FIXTURES / "gpt2_tiny", "--text", "Hi", "--ablate", "cross:0:0",
                       "--out", tmp_path / "t.npz")
    assert code != 0 and "--ablate" in err and len(err.strip().splitlines()) == 1


def test_compare_on_an_encoder_decoder_goes_through_the_encoder(capsys, tmp_path):
    from transformer_stepper.core.analysis.seq2seq_compare import compare_source
    from transformer_stepper.io.loader import load_model

    texts = ["The bank of the river.", "She went to the bank to deposit money."]
    code, out, err = run(capsys, "compare", "--model", FIXTURES / "marian_tiny", "--word", "bank",
                         "--text", texts[0], "--text", texts[1], "--out", tmp_path / "c")
    assert code == 0, err
    assert "through the encoder" in err and (tmp_path / "c" / "compare.csv").is_file()
    expected = compare_source(load_model(FIXTURES / "marian_tiny"), texts, "bank")
    csv = (tmp_path / "c" / "compare.csv").read_text(encoding="utf-8")
    assert f"{expected.pair_cosines[0, -1]:.6f}"[:6] in csv
