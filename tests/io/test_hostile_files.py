"""Hostile files (issue 25): a weights file changed while mapped, FIFOs and devices, shard paths
leaving the model folder, tensors aliasing each other's bytes. Each is refused in one line that
names the file, without crashing, waiting or reading another file's numbers."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.builders import gpt2_folder, model_error, write_raw_safetensors
from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.safetensors_file import SafetensorsFile

ROOT = Path(__file__).resolve().parents[2]


def _shrink(path: Path, keep: int) -> None:
    with open(path, "r+b") as handle:   # in place: the same inode, as a sync tool would
        handle.truncate(keep)


# ------------------------------------------------------------------ a file changed while open
def test_truncated_while_open_is_refused_not_sigbus(tmp_path):
    # in a subprocess: a read of the truncated map would kill it with SIGBUS (exit -7)
    folder = gpt2_folder(tmp_path / "gpt2")
    script = textwrap.dedent(f"""
        import os
        from transformer_stepper import load_model
        from transformer_stepper.core.model.errors import ModelError
        model = load_model({str(folder)!r})
        model.trace("hello world")
        path = {str(folder / "model.safetensors")!r}
        with open(path, "r+b") as handle:
            handle.truncate(os.path.getsize(path) // 3)
        for attempt in (lambda: model.trace("hello world again"), lambda: model("hello")):
            try:
                attempt()
            except ModelError as exc:
                print("refused:", exc)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "desktop")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert lines == [f"refused: {folder / 'model.safetensors'}: the file changed on disk; reopen it"] * 2


def test_rewritten_in_place_is_refused(tmp_path):
    # same size, other bytes (a model re-saved into the same folder): not silently mixed in
    folder = gpt2_folder(tmp_path / "gpt2")
    model = load_model(folder)
    trace = model.trace("hello world")
    path = folder / "model.safetensors"
    data = path.read_bytes()
    stat = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert model_error(model.trace, "hello") == f"{path}: the file changed on disk; reopen it"
    # the last good trace is untouched and still readable (its arrays are its own)
    assert np.isfinite(trace["hidden_states"]).all()


def test_replaced_by_rename_is_refused(tmp_path):
    folder = gpt2_folder(tmp_path / "gpt2")
    model = load_model(folder)
    other = gpt2_folder(tmp_path / "other", seed=3)
    os.replace(other / "model.safetensors", folder / "model.safetensors")
    assert model_error(model.trace, "hello").endswith("the file changed on disk; reopen it")


def test_unchanged_file_still_traces(tmp_path):
    folder = gpt2_folder(tmp_path / "gpt2")
    model = load_model(folder)
    a = model.trace("hello world")
    os.utime(folder / "config.json")       # touching a file that is not mapped changes nothing
    b = model.trace("hello world")
    assert np.array_equal(a["hidden_states"], b["hidden_states"])


# ------------------------------------------------------------------ FIFOs and devices
@pytest.mark.parametrize("name", ["model.safetensors", "weights.npz", "config.json", "tokenizer.json"])
def test_fifo_is_refused_without_waiting(tmp_path, name):
    folder = gpt2_folder(tmp_path / "gpt2")
    target = folder / name
    if target.exists():
        target.unlink()
    os.mkfifo(target)
    opened = target if name.endswith(".npz") else folder
    message = model_error(load_model, opened)       # would block forever on open()
    assert message == (f"{target}: not a regular file (a FIFO); only regular files are "
                       f"opened")


def test_symlink_to_a_device_is_not_called_missing(tmp_path):
    folder = gpt2_folder(tmp_path / "gpt2")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to("/dev/zero")
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: not a regular file (a character device); only regular files "
        f"are opened")
    # a file without a suffix may be a GGUF (Ollama's blobs): only a regular one is looked into
    assert model_error(load_model, "/dev/zero") == (
        "/dev/zero: not a regular file (a character device); only regular files are opened")


# ------------------------------------------------------------------ shard paths
def _sharded(tmp_path: Path) -> tuple[Path, dict]:
    folder = gpt2_folder(tmp_path / "model", shards=2)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    return folder, index


@pytest.mark.parametrize("shard", ["../other/model-00001-of-00002.safetensors", "/etc/passwd",
                                   "sub/../../other/model-00001-of-00002.safetensors"])
def test_shard_outside_the_folder_is_refused(tmp_path, shard):
    folder, index = _sharded(tmp_path)
    gpt2_folder(tmp_path / "other", shards=2, seed=5)
    name = next(iter(index["weight_map"]))
    index["weight_map"][name] = shard
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps(index))
    message = model_error(load_model, folder)
    assert message == (f"{path}: tensor {name} maps to a shard outside the model folder ({shard!r}); "
                       f"shards must be files in {folder}")


def test_shard_symlink_leaving_the_folder_is_refused(tmp_path):
    folder, index = _sharded(tmp_path)
    other = gpt2_folder(tmp_path / "other", shards=2, seed=5)
    shard = "model-00001-of-00002.safetensors"
    (folder / shard).unlink()
    (folder / shard).symlink_to(other / shard)
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors.index.json'}: shard {shard} is a link to a file outside "
        f"the model folder (refused)")


def test_hf_cache_snapshot_links_into_blobs_are_allowed(tmp_path):
    # the hub cache's layout: snapshots/<rev>/<file> -> ../../blobs/<sha>
    source, _ = _sharded(tmp_path)
    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    snapshot.mkdir(parents=True), blobs.mkdir()
    for i, file in enumerate(sorted(source.iterdir())):
        (blobs / f"sha{i}").write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(Path("../../blobs") / f"sha{i}")
    assert np.allclose(load_model(snapshot).trace("hello")["hidden_states"],
                       load_model(source).trace("hello")["hidden_states"])


def test_a_non_safetensors_shard_is_not_quoted(tmp_path):
    folder, index = _sharded(tmp_path)
    secret = folder / "notes.safetensors"
    secret.write_bytes(b"SECRET-PASSWORD-1234567890" * 4)
    index["weight_map"] = {name: "notes.safetensors" for name in index["weight_map"]}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    message = model_error(load_model, folder)
    assert "SECRET" not in message and str(secret) in message


# ------------------------------------------------------------------ aliased tensors
def test_overlapping_data_offsets_are_refused(tmp_path):
    data = np.arange(8, dtype=np.float32).tobytes()
    path = write_raw_safetensors(tmp_path / "a.safetensors", {
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, data)
    assert model_error(SafetensorsFile, path) == (
        f"{path}: tensors a and b overlap in the file (data_offsets alias the same bytes; refused)")


def test_a_repeated_tensor_name_is_refused(tmp_path):
    path = tmp_path / "a.safetensors"
    header = (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
              b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}')
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    assert model_error(SafetensorsFile, path) == (
        f"{path}: tensor a is named twice in the header (refused: one name would hide the "
        f"other's bytes)")


def test_adjacent_and_empty_tensors_are_fine(tmp_path):
    data = np.arange(8, dtype=np.float32).tobytes()
    path = write_raw_safetensors(tmp_path / "a.safetensors", {
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, data)
    assert list(SafetensorsFile(path).get("b")) == [4, 5, 6, 7]


def test_a_fifo_without_a_suffix_is_refused_without_waiting(tmp_path):
    # the loader looks for GGUF's magic in files without a suffix (Ollama's blobs): never in a FIFO
    fifo = tmp_path / "sha256-blob"
    os.mkfifo(fifo)
    assert model_error(load_model, fifo) == f"{fifo}: not a regular file (a FIFO); only regular files are opened"


def test_a_gguf_truncated_while_open_is_refused_not_read(tmp_path):
    import shutil
    source = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "gguf").glob("*.gguf"))[0]
    path = tmp_path / source.name
    shutil.copy(source, path)
    model = load_model(path)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with pytest.raises(ModelError, match="the file changed on disk; reopen it"):
        model.trace("the bank")
