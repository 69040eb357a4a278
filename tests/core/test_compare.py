"""core/analysis/compare.py: the same word in several sentences, and the numbers of every Compare plot."""
import csv
import io

import numpy as np
import pytest

from tests.builders import bert_folder, gpt2_folder, llama_folder, model_error
from transformer_stepper import compare as public_compare
from transformer_stepper.core.analysis import compare as cmp
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.compare_csv import compare_csv_bytes
from transformer_stepper.io.loader import load_model

RIVER = ["He sat on the bank of the river .", "He rowed the boat to the bank by the water ."]
MONEY = ["She kept the gold in the bank with the clerk .",
         "He borrowed money from the bank to pay the debt ."]


@pytest.fixture(scope="module")
def builtin():
    return load_model()


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return load_model(bert_folder(tmp_path_factory.mktemp("bert"), n_layer=2))


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(gpt2_folder(tmp_path_factory.mktemp("gpt2"), n_layer=2))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return load_model(llama_folder(tmp_path_factory.mktemp("llama")))


def _cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- the numbers ---------------------------------------------------------------------------------
def test_csv_cosines_equal_cosines_of_each_sentences_own_trace(builtin):
    texts = RIVER + MONEY[:1]
    result = cmp.compare(builtin, texts, "bank")
    rows = list(csv.reader(io.StringIO(compare_csv_bytes(result).decode())))
    header, body = rows[0], rows[1:]
    assert header[:2] == ["index", "state"] and len(body) == builtin.config.n_layer + 1
    states = [builtin.trace(t).hidden_states for t in texts]           # traced afresh, directly
    where = [builtin.trace(t).tokens.index("bank") for t in texts]
    for row in body:
        index = int(row[0])
        got = dict(zip(header[2:], map(float, row[2:])))
        for i, j in [(0, 1), (0, 2), (1, 2)]:
            want = _cosine(states[i][index, where[i]], states[j][index, where[j]])
            assert got[f"cos_S{i + 1}_S{j + 1}"] == pytest.approx(want, abs=1e-12)
        for i in range(3):
            want = _cosine(states[i][index, where[i]], states[i][0, where[i]])
            assert got[f"cos_S{i + 1}_to_own_state0"] == pytest.approx(want, abs=1e-12)


def test_lookup_difference_is_exactly_zero_for_the_same_id(builtin):
    result = cmp.compare(builtin, RIVER + MONEY, "bank")
    assert len({o.token_id for o in result.occurrences}) == 1
    for i in range(1, len(result.occurrences)):
        difference = result.lookup_difference(i, 0)
        assert difference.dtype == np.float32 and np.all(difference == 0.0)
    assert np.array_equal(result.lookup_rows[0], builtin.params["wte"][result.occurrences[0].token_id])


def test_lookup_rows_differ_for_different_pieces(builtin):
    texts = ["He sat on the bank of the river .", "She kept the gold in the bank with the clerk ."]
    river = builtin.trace(texts[0]).tokens.index("river")
    result = cmp.compare(builtin, texts, "bank", positions=[river, None])
    assert not result.same_id(0, 1)
    assert np.abs(result.lookup_difference(1, 0)).max() > 0


def test_bank_river_vs_money_separates_in_the_builtin_model(builtin):
    result = cmp.compare(builtin, [RIVER[0], MONEY[0]], "bank")
    embedding, last = result.pair_cosines[0, 0], result.pair_cosines[0, -1]
    assert last < embedding
    assert last < embedding - 0.2                   # measured 0.905 -> 0.567


def test_same_sense_stays_closer_than_across_senses(builtin):
    result = cmp.compare(builtin, RIVER + MONEY, "bank")
    last = {result.pair_label(p): result.pair_cosines[p, -1] for p in range(len(result.pairs))}
    within = min(last["S1–S2"], last["S3–S4"])
    across = max(last["S1–S3"], last["S1–S4"], last["S2–S3"], last["S2–S4"])
    assert within > across


def test_shapes_pool_map_and_nearest(builtin):
    result = cmp.compare(builtin, RIVER + MONEY, "bank")
    n_states, n_occ = builtin.config.n_layer + 1, 4
    n_pool = sum(int((~builtin.trace(t).special_tokens_mask).sum()) for t in RIVER + MONEY)
    assert result.state_names == ("embedding", "layer 0", "layer 1", "layer 2")
    assert result.pair_cosines.shape == (6, n_states) and result.self_cosines.shape == (n_occ, n_states)
    assert np.allclose(result.self_cosines[:, 0], 1.0)
    assert result.hidden.shape == (n_occ, n_states, builtin.config.d_model)
    assert result.map_coords.shape == (n_states, n_pool, 2)
    assert np.all(result.map_explained >= 0) and np.all(result.map_explained.sum(axis=1) <= 1 + 1e-9)
    for o, occ in enumerate(result.occurrences):
        p = result.occurrence_pool[o]
        assert result.pool_sentence[p] == occ.sentence and result.pool_position[p] == occ.position
        # nearest: best first, never the word itself (nor its other occurrences)
        assert np.all(np.diff(result.nearest_cosines[o], axis=1) <= 1e-12)
        assert all(result.pool_pieces[i] != "bank" for i in result.nearest[o].ravel() if i >= 0)
        best = result.nearest[o, -1, 0]
        trace = result.sentences[result.pool_sentence[best]].trace
        state = trace.hidden_states[-1, result.pool_position[best]]
        assert result.nearest_cosines[o, -1, 0] == pytest.approx(_cosine(result.hidden[o, -1], state))


def test_attention_rows_are_the_tokens_own_rows(builtin):
    result = cmp.compare(builtin, RIVER, "bank")
    rows = cmp.attention_rows(result, 1)
    for occ, row in zip(result.occurrences, rows):
        trace = result.sentences[occ.sentence].trace
        assert np.array_equal(row, trace.layer("attn_weights", 1)[:, occ.position, :])
        assert np.allclose(row.sum(axis=1), 1.0, atol=1e-5)


def test_table_columns(builtin):
    result = cmp.compare(builtin, RIVER + MONEY[:1], "bank")
    columns, values = result.table()
    assert columns == ["cos_S1_S2", "cos_S1_S3", "cos_S2_S3", "cos_S1_to_own_state0",
                       "cos_S2_to_own_state0", "cos_S3_to_own_state0"]
    assert values.shape == (builtin.config.n_layer + 1, 6)


def test_public_api(builtin):
    result = public_compare(builtin, RIVER, "bank")
    assert isinstance(result, cmp.Comparison) and len(result.pairs) == 1
    with pytest.raises(TypeError):
        public_compare("no model", RIVER, "bank")


# -- what enters layer 0, per family ------------------------------------------------------------------
def test_bert_family_differs_at_layer_0_by_position(bert):
    result = cmp.compare(bert, ["the bank of the river", "he sat on the bank by the river"], "bank")
    a, b = result.occurrences
    assert a.position != b.position and result.same_id(0, 1)
    assert set(result.entry) >= {"token_embeddings", "position_embeddings", "token_type_embeddings",
                                 "embedding_output"}
    assert np.array_equal(result.entry["token_embeddings"][0], result.entry["token_embeddings"][1])
    assert result.pair_cosines[0, 0] < 1.0 - 1e-4          # e + p + t, then LayerNorm: differs


def test_rotary_model_is_identical_at_layer_0(llama):
    texts = ["the bank", "a cat sat by the bank"]
    result = cmp.compare(llama, texts, "bank")                 # Ġb ank: the same first piece
    assert result.occurrences[0].position != result.occurrences[1].position and result.same_id(0, 1)
    assert "position_embeddings" not in result.entry and "rope_angles" in result.entry
    assert np.array_equal(result.hidden[0, 0], result.hidden[1, 0])       # the same row
    assert result.pair_cosines[0, 0] == pytest.approx(1.0, abs=1e-12)
    assert result.pair_cosines[0, -1] < 1.0 - 1e-4                         # q/k rotated apart
    angles = result.entry["rope_angles"]
    assert angles.shape == (2, llama.config.d_head // 2)
    assert np.allclose(angles[1] / result.occurrences[1].position,
                       angles[0] / result.occurrences[0].position)


# -- finding the word ---------------------------------------------------------------------------------
@pytest.mark.parametrize("piece", ["bank", "Ġbank", "▁bank", "##bank"])
def test_piece_text_drops_the_tokenizers_marks(piece):
    assert cmp.piece_text(piece) == "bank"


def test_byte_level_pieces_are_matched_after_a_space(gpt2):
    result = cmp.compare(gpt2, ["the cat sat by the river", "we saw the boat"], "the")
    for occ in result.occurrences:
        trace = result.sentences[occ.sentence].trace
        assert trace.tokens[occ.position] in ("the", "Ġthe")
    assert result.sentences[1].trace.tokens[result.occurrences[1].position] == "Ġthe"


def test_a_word_of_several_pieces_uses_the_first_and_says_so(gpt2, bert):
    result = cmp.compare(gpt2, ["a bank", "the bank by the river"], "bank")   # Ġb ank
    assert all(o.piece == "Ġb" for o in result.occurrences)
    assert result.notes and "2 pieces" in result.notes[0] and "first" in result.notes[0]
    result = cmp.compare(bert, ["the riverbank", "a riverbank"], "riverbank")
    assert result.notes and "the first, 'river'" in result.notes[0]


def test_the_word_is_whole(bert):
    # 'bank' is not the ##bank of 'riverbank', nor the start of 'banks'
    sentences = cmp.sentences_of(bert, ["the riverbank", "the banks", "the bank"], "bank")
    assert [s.position for s in sentences] == [None, None, 2]
    assert "no 'bank' in it" in sentences[0].problem


def test_case_is_ignored_after_exact_pieces(gpt2, bert):
    sentences = cmp.sentences_of(bert, ["The BANK of", "the bank"], "Bank")
    assert [s.position for s in sentences] == [2, 2] and not any(s.note for s in sentences)
    # byte-level 'The' is T h e (no merge): found in the text, its first piece compared
    sentences = cmp.sentences_of(gpt2, ["The cat", "the cat"], "the")
    assert [s.position for s in sentences] == [0, 0]
    assert "3 pieces" in sentences[0].note and sentences[1].note == ""


def test_a_sentence_without_the_word_is_left_out_and_named(builtin):
    result = cmp.compare(builtin, RIVER + ["The dog gave a loud bark at the cat ."], "bank")
    assert len(result.occurrences) == 2
    assert result.problems == ("sentence 3 ('The dog gave a loud bark at the cat .'): no 'bank' in it",)
    assert result.sentences[2].trace is not None and result.sentences[2].position is None


def test_empty_sentences_are_ignored(builtin):
    result = cmp.compare(builtin, ["", RIVER[0], "   ", RIVER[1]], "bank")
    assert [s.number for s in result.sentences] == [1, 2]
    assert [s.text for s in result.sentences] == RIVER


def test_bad_input_is_one_line(builtin):
    nine = [RIVER[0]] * 9
    assert "9 sentences" in model_error(cmp.compare, builtin, nine, "bank")
    assert "at least 2" in model_error(cmp.compare, builtin, [RIVER[0], ""], "bank")
    message = model_error(cmp.compare, builtin, [RIVER[0], MONEY[0]], "xyzzy")
    assert "not in the model's vocabulary" in message and "sentences 1, 2" in message
    message = model_error(cmp.compare, builtin, [RIVER[0], "The dog gave a bark ."], "bank")
    assert "in 1 of the 2 sentences" in message and "sentence 2" in message
    with pytest.raises(ModelError):
        cmp.compare(builtin, RIVER, "")


def test_positions_chosen_by_hand(builtin):
    result = cmp.compare(builtin, RIVER, "", positions=[1, 1])
    assert [o.piece for o in result.occurrences] == ["he", "he"]
    sentences = cmp.sentences_of(builtin, RIVER, "bank", {0: 99})
    assert "outside" in sentences[0].problem


def test_traces_given_are_reused_not_recomputed(builtin):
    first = cmp.sentences_of(builtin, RIVER, "bank")
    traces = {s.text: s.trace for s in first}
    again = cmp.sentences_of(builtin, RIVER + MONEY[:1], "bank", traces=traces)
    assert again[0].trace is first[0].trace and again[1].trace is first[1].trace
    assert again[2].trace is not None
