"""GGUF files written here with gguf-py's writer: a valid tiny Llama opens, and every kind of
broken or foreign file is refused in one line naming the file and the problem."""
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.gguf_packers import PACKERS, pack
from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.analysis.provenance.explain import explain
from transformer_stepper.io.gguf.file import GGUFFile
from transformer_stepper.io.gguf.model import Unpermute, shard_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
TOKENS = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "a", "b", "▁a"]
D = 32


def write(path: Path, arch="llama", drop=(), extra=None, n_tokens=None, tensors=None, qtype=None,
          fixed=None, split=0, width=D):
    """A one-layer Llama-layout GGUF (d_model `width`, 2 heads); `drop` leaves metadata keys out,
    `fixed` adds tensors with given values, `split` > 0 writes shards of that many tensors;
    `qtype` quantizes the 2-D weights (with gguf-py, or the project's packers for the types
    gguf-py cannot quantize)."""
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), arch, split_max_tensors=split)
    D, F = width, max(64, width)             # (a 256-weight block type needs 256-wide rows)
    kv = {"context_length": 64, "embedding_length": D, "block_count": 1, "feed_forward_length": F,
          "attention.head_count": 2, "attention.head_count_kv": 2,
          "attention.layer_norm_rms_epsilon": 1e-5}
    for key, value in kv.items():
        if key not in drop:
            (writer.add_float32 if isinstance(value, float) else writer.add_uint32)(f"{arch}.{key}", value)
    for key, value in (extra or {}).items():
        writer.add_string(key, value)
    tokens = TOKENS[:n_tokens] if n_tokens else TOKENS
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([-float(i) for i in range(len(tokens))])
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    shapes = tensors or {"token_embd.weight": (len(TOKENS), D), "output_norm.weight": (D,),
                         "blk.0.attn_norm.weight": (D,), "blk.0.ffn_norm.weight": (D,),
                         **{f"blk.0.attn_{n}.weight": (D, D) for n in "qkv"},
                         "blk.0.attn_output.weight": (D, D), "blk.0.ffn_gate.weight": (F, D),
                         "blk.0.ffn_up.weight": (F, D), "blk.0.ffn_down.weight": (D, F)}
    for name, shape in shapes.items():
        w = rng.standard_normal(shape).astype(np.float32)
        if qtype is not None and w.ndim == 2 and qtype.name in PACKERS:
            packed = pack(w, qtype.name)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=qtype)
        elif qtype is not None and w.ndim == 2:
            writer.add_tensor(name, gguf.quants.quantize(w, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, w)
    for name, value in (fixed or {}).items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def refused(path) -> str:
    with pytest.raises(ModelError) as info:
        load_model(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


def test_a_valid_tiny_file_opens_and_runs(tmp_path):
    model = load_model(write(tmp_path / "ok.gguf", qtype=gguf.GGMLQuantizationType.Q8_0))
    assert model.config.family == "llama" and model.config.tied_head
    assert np.isfinite(model.trace("ab a").logits).all()


def test_wrong_magic_and_version(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGML" + bytes(60))
    assert "not a GGUF file (magic b'GGML'" in refused(path)
    path.write_bytes(b"GGUF" + (9).to_bytes(4, "little") + bytes(60))
    assert "GGUF version 9 is not read" in refused(path)
    path.write_bytes(b"GGUF")
    assert "only 4 bytes" in refused(path)


def test_truncated_files(tmp_path):
    whole = write(tmp_path / "whole.gguf").read_bytes()
    for cut, expect in ((len(whole) - 100, "past the end of the file"), (200, "truncated or corrupt")):
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(whole[:cut])
        assert expect in refused(path)


def test_tensor_offset_past_the_end_and_unknown_quant_type(tmp_path):
    path = write(tmp_path / "m.gguf")
    reader = gguf.GGUFReader(path, "r+")
    reader.tensors[0].field.parts[5][0] = 1 << 40      # data offset of the first tensor
    reader.data.flush()
    del reader
    assert "past the end of the file" in refused(path)
    path = write(tmp_path / "q.gguf")
    reader = gguf.GGUFReader(path, "r+")
    reader.tensors[0].field.parts[4][0] = 99           # its type
    reader.data.flush()
    del reader
    assert "tensor token_embd.weight has unknown quant type 99 (a type newer than the installed gguf" in refused(path)


def test_a_quant_type_the_gguf_package_cannot_dequantize_is_refused_naming_it(tmp_path):
    """Q8_1 (llama.cpp's activation format) has no dequantizer in gguf-py: refused at open, in
    one line naming the file, the tensor and the type."""
    path = write(tmp_path / "q81.gguf")
    reader = gguf.GGUFReader(path, "r+")
    assert reader.tensors[0].name == "token_embd.weight"
    reader.tensors[0].field.parts[4][0] = int(gguf.GGMLQuantizationType.Q8_1)
    reader.data.flush()
    del reader
    message = refused(path)
    assert message.startswith(f"{path}: tensor token_embd.weight has quant type Q8_1, which the installed "
                              f"gguf package ("), message
    assert message.endswith(") cannot dequantize")


@pytest.mark.parametrize("qtype", ["Q5_K", "Q3_K", "Q2_K", "IQ4_XS", "IQ4_NL", "MXFP4", "Q4_1", "Q5_0", "Q5_1"])
def test_files_of_the_newer_quant_types_open_and_run(tmp_path, qtype):
    """Every 2-D weight of a tiny Llama packed in the type (tests/gguf_packers.py, or gguf-py's
    quantizer for Q4_1/Q5_0/Q5_1; 256-wide rows for the 256-weight blocks): it opens, reads
    gguf-py's dequantized weights and runs, and a weight's provenance (its block's arithmetic and
    its Python) ends on the weight the forward pass reads."""
    qtype = gguf.GGMLQuantizationType[qtype]
    width = 256 if gguf.GGML_QUANT_SIZES[qtype][0] == 256 else D
    path = write(tmp_path / f"tiny.{qtype.name}.gguf", qtype=qtype, width=width)
    model = load_model(path)
    embd = next(t for t in gguf.GGUFReader(path).tensors if t.name == "token_embd.weight")
    assert embd.tensor_type == qtype
    np.testing.assert_array_equal(model.params["wte"], gguf.quants.dequantize(embd.data, qtype))
    trace = model.trace("ab a")
    assert np.isfinite(trace.logits).all()
    for param, index in (("h.0.attn.q.w", (5, 3)), ("h.0.mlp.proj.w", (width - 1, 7)), ("wte", (260, 1))):
        e = explain(model, trace, "param:" + param, index)
        assert f"({qtype.name})" in e.title and e.value == float(model.params[param][index])
        assert any(s.label.startswith(f"q[") for s in e.steps)
        scope = {"model": model}
        exec(e.python, scope)
        assert float(scope["value"]) == float(model.params[param][index])


def test_missing_metadata_key(tmp_path):
    message = refused(write(tmp_path / "m.gguf", drop=("embedding_length",)))
    assert message.endswith("GGUF metadata has no 'llama.embedding_length'")


def test_vocabulary_that_disagrees_with_the_embedding_rows(tmp_path):
    message = refused(write(tmp_path / "m.gguf", n_tokens=len(TOKENS) - 2))
    assert f"the vocabulary has {len(TOKENS) - 2} tokens but token_embd.weight has {len(TOKENS)} rows" in message


def test_vision_tower_lora_and_unknown_architectures(tmp_path):
    assert "vision tower" in refused(write(tmp_path / "v.gguf", arch="clip", extra={"general.type": "mmproj"}))
    assert "LoRA adapter" in refused(write(tmp_path / "l.gguf", extra={"general.type": "adapter"}))
    assert "architecture 'mamba' is not supported" in refused(write(tmp_path / "x.gguf", arch="mamba"))


def test_sharded_files_open_as_one_model(tmp_path):
    source = FIXTURES / "llama_small.Q8_0.gguf"
    reader = gguf.GGUFReader(source)
    names = [t.name for t in reader.tensors]
    assert shard_paths(source) == [source]
    missing = tmp_path / "m-00001-of-00002.gguf"
    shutil.copy(source, missing)
    assert "shard m-00002-of-00002.gguf of this 2-file GGUF is missing" in refused(missing)
    assert len(names) > 2


def test_unpermute_inverts_llama_cpps_permutation():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3 * 8, 5)).astype(np.float32)  # 3 heads of 8 rows
    stored = w.reshape(3, 2, 4, 5).swapaxes(1, 2).reshape(w.shape)  # convert_hf_to_gguf's permute
    np.testing.assert_array_equal(Unpermute(3)(stored), w)


def test_a_quantized_tensor_is_dequantized_only_when_read(tmp_path):
    f = GGUFFile(write(tmp_path / "m.gguf", qtype=gguf.GGMLQuantizationType.Q4_0))
    assert f.quant_type("blk.0.attn_q.weight") == "Q4_0" and f.shape("blk.0.attn_q.weight") == (D, D)
    rows = f.rows("token_embd.weight", np.array([5, 7]))
    np.testing.assert_array_equal(rows, f.get("token_embd.weight")[[5, 7]])


def test_llama3_rope_factors_are_read_back_as_llama3_scaling(tmp_path):
    d_head, theta = D // 2, 10000.0
    freqs = 1.0 / (theta ** (np.arange(0, d_head, 2, dtype=np.float32) / d_head))
    wavelen = 2 * np.pi / freqs
    factors = np.where(wavelen < 8192 / 4, 1.0, np.where(wavelen > 8192, 8.0, 2.0)).astype(np.float32)
    message = refused(write(tmp_path / "odd.gguf", fixed={"rope_freqs.weight": factors}))
    assert "rope_freqs.weight holds rope factors" in message   # 2.0 mid-band: not Llama 3's
    smooth = (8192 / wavelen - 1.0) / 3.0
    factors = np.where(wavelen < 8192 / 4, 1.0, np.where(wavelen > 8192, 8.0, 1 / ((1 - smooth) / 8 + smooth)))
    model = load_model(write(tmp_path / "l3.gguf", fixed={"rope_freqs.weight": factors.astype(np.float32)}))
    assert (model.config.rope_scaling, model.config.rope_factor, model.config.rope_original_n_ctx) == ("llama3", 8.0, 8192)


def test_a_split_file_opens_as_one_model_from_any_shard(tmp_path):
    write(tmp_path / "m.gguf", split=4)
    shards = sorted(tmp_path.glob("m-*-of-*.gguf"))
    assert len(shards) >= 3
    whole = load_model(write(tmp_path / "single.gguf"))
    for shard in (shards[0], shards[-1]):
        model = load_model(shard)
        np.testing.assert_array_equal(model.trace("ab a").logits, whole.trace("ab a").logits)


@pytest.mark.parametrize("file_name", sorted(p.name for p in FIXTURES.glob("*.gguf")))
def test_header_reader_equals_gguf_py(file_name):
    """io/gguf_header (one pass, 25x faster on a Llama 3 vocabulary) reads the same metadata and
    tensor table as gguf-py's GGUFReader."""
    path = FIXTURES / file_name
    ours = GGUFFile(path)
    reader = gguf.GGUFReader(path, "r")
    theirs = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert ours.metadata == theirs
    assert [t.name for t in reader.tensors] == list(ours.tensors)
    for t in reader.tensors:
        mine = ours.tensors[t.name]
        assert (mine.tensor_type, mine.n_bytes, mine.data_offset) == (t.tensor_type, t.n_bytes, t.data_offset)
        assert mine.shape.tolist() == t.shape.tolist() and mine.data.shape == t.data.shape
        np.testing.assert_array_equal(mine.data, t.data)
