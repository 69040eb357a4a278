"""Ollama manifests and LM Studio folders, laid out as those tools write them, are listed by name
and open as models (an Ollama blob has no .gguf suffix: the loader reads its magic)."""
import json
import shutil
from pathlib import Path

from transformer_stepper import load_model
from transformer_stepper.io.gguf.local_stores import list_lmstudio, list_ollama

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gguf" / "qwen2_small.Q8_0.gguf"


def test_ollama_manifests_map_names_to_blobs(tmp_path):
    digest = "sha256:" + "ab" * 32
    (tmp_path / "blobs").mkdir()
    shutil.copy(FIXTURE, tmp_path / "blobs" / digest.replace(":", "-"))
    for rel in ("registry.ollama.ai/library/tiny/q8", "registry.ollama.ai/someone/other/latest"):
        manifest = tmp_path / "manifests" / rel
        manifest.parent.mkdir(parents=True)
        manifest.write_text(json.dumps({"layers": [
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "cd" * 32},
            {"mediaType": "application/vnd.ollama.image.model", "digest": digest}]}))
    (tmp_path / "manifests" / "broken").write_text("{not json")
    found = list_ollama(tmp_path)
    assert [m.name for m in found] == ["tiny:q8", "someone/other:latest"]
    assert load_model(found[0].path).config.family == "qwen2"


def test_lmstudio_folders_skip_vision_towers_and_later_shards(tmp_path):
    folder = tmp_path / "publisher" / "Tiny-GGUF"
    folder.mkdir(parents=True)
    for name in ("tiny-Q8_0.gguf", "mmproj-tiny.gguf", "big-00001-of-00002.gguf", "big-00002-of-00002.gguf"):
        (folder / name).write_bytes(b"")
    names = [m.name for m in list_lmstudio([tmp_path, tmp_path / "absent"])]
    assert names == ["publisher/Tiny-GGUF/big-00001-of-00002.gguf", "publisher/Tiny-GGUF/tiny-Q8_0.gguf"]
