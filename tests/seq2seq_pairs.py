"""Two encoder–decoders to compare in tests without torch: a committed fixture (tests/fixtures/)
and a copy of it with every float weight moved by seeded noise (numpy and safetensors only; the
HF-checked copies of tests/reference/test_seq2seq_diff_reference.py are saved by transformers)."""
import shutil
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def noised_copy(name: str, out: Path, scale: float = 0.02, seed: int = 36) -> Path:
    """tests/fixtures/<name> with every float tensor w + scale · mean|w| · N(0, 1), in `out`."""
    from safetensors.numpy import load_file, save_file

    folder = FIXTURES / name
    out.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(folder / "model.safetensors"))
    rng = np.random.default_rng(seed)
    moved = {key: (value + (scale * np.abs(value).mean() * rng.standard_normal(value.shape)).astype(value.dtype)
                   if value.dtype.kind == "f" else value) for key, value in tensors.items()}
    save_file(moved, str(out / "model.safetensors"), metadata={"format": "pt"})
    for item in folder.iterdir():
        if item.is_file() and item.name != "model.safetensors":
            shutil.copy(item, out / item.name)
    return out
