"""A GGUF model as a checkpoint with Hugging Face's names, so the families' key maps and configs
open it like an HF folder. Which names, and how llama.cpp's converter changed some tensors, is each
family's GGUF layout (io/families/gguf_layout.py, GGUF_LAYOUTS in the family module); the changes
are undone here, per tensor, on read:

  unpermute_heads / unpermute_kv_heads   q and k rows permuted for llama.cpp's interleaved rotary
                                         pairs -> HF's halves (llama)
  minus_one     RMSNorm gains stored as 1 + w -> w (gemma: the family adds the 1 again)
  transposed    Conv1D weights stored [out, in] -> [in, out] (gpt2)
  as_row        a gain stored [d] -> HF's [1, d] (qwen2moe's shared-expert gate)
  experts       a mixture-of-experts layer's experts stored as one 3-D tensor each for gate, up and
                down (ffn_{gate,up,down}_exps [n_expert, out, in]): each expert is its own Hugging
                Face name, read as one slice of it (only the experts a pass routes to are read and
                dequantized)
Sharded files (name-00001-of-0000N.gguf) open as one model. Anything else is refused in one line."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError
from .. import families
from ..families.gguf_layout import GGUFLayout
from .file import GGUFFile

_SHARD = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_BLOCK_TENSOR = re.compile(r"^blk\.(\d+)\.([a-z_0-9]+)\.(weight|bias)$")
_TOP_TENSOR = re.compile(r"^([a-z_]+)\.(weight|bias)$")


class Fix:
    """How a stored tensor becomes Hugging Face's: a name for the dequantization panel and a
    function of the float32 array."""
    name = "as stored"

    def __call__(self, w: np.ndarray) -> np.ndarray:
        return w


class Unpermute(Fix):
    """llama.cpp's converter reorders each head's rows (pairs (i, i + d/2) -> (2i, 2i + 1)) so its
    rotary rotates neighbours; this puts the rows back in HF's order (halves)."""

    def __init__(self, n_head: int) -> None:
        self.n_head = n_head
        self.name = f"rows un-permuted ({n_head} heads: llama.cpp's rotary pairs -> HF's halves)"

    def stored_row(self, row: int, n_rows: int) -> int:
        """The stored row of HF row `row`: HF's (head h, half a, i) was stored at (h, i, a)."""
        half = n_rows // self.n_head // 2
        head, within = divmod(row, 2 * half)
        which, i = divmod(within, half)
        return head * 2 * half + 2 * i + which

    def __call__(self, w):
        shape = w.shape
        value = w.reshape(self.n_head, shape[0] // self.n_head // 2, 2, *shape[1:])
        value = np.ascontiguousarray(value.swapaxes(1, 2).reshape(shape))
        value.flags.writeable = False
        return value


class MinusOne(Fix):
    name = "minus 1 (llama.cpp stores Gemma's 1 + w)"

    def __call__(self, w):
        value = w - np.float32(1.0)
        value.flags.writeable = False
        return value


class Transposed(Fix):
    name = "transposed (llama.cpp stores GPT-2's Conv1D as [out, in])"

    def __call__(self, w):
        return w.T


class ExpertSlice(Fix):
    """One expert of a 3-D experts tensor: slice `expert` of [n_expert, out, in], dequantized
    alone (the other experts' blocks are not read)."""

    def __init__(self, expert: int) -> None:
        self.expert = expert
        self.name = f"expert {expert}'s slice of the 3-D experts tensor"


class AsRow(Fix):
    """Qwen2-MoE's shared-expert gate, stored [d_model] by llama.cpp, is Hugging Face's [1, d_model]."""
    name = "as one row [1, d_model]"

    def __call__(self, w):
        return w.reshape(1, -1)


AS_STORED = Fix()


def shard_paths(path: Path) -> list[Path]:
    """All shards of a split GGUF given any one of them (or the file itself)."""
    match = _SHARD.match(path.name)
    if match is None:
        return [path]
    count = int(match.group("count"))
    paths = [path.with_name(f"{match.group('stem')}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ModelError(f"{path}: shard {missing[0]} of this {count}-file GGUF is missing")
    return paths


class GGUFCheckpoint:
    """The interface loader.Checkpoint has (names, shape, get, rows ...), over GGUF files."""

    def __init__(self, files: list[GGUFFile], where: dict[str, tuple[GGUFFile, str, Fix]],
                 source: str) -> None:
        self.files, self.where, self.source = files, where, source
        self.metadata: dict = {}

    def names(self) -> set[str]:
        return set(self.where)

    def check_unchanged(self, name: Optional[str] = None) -> None:
        """The file holding `name` (every file, with None) is still the one opened."""
        for f in (self.files if name is None else (self.where[name][0],)):
            f.check_unchanged()

    def file_of(self, name: str) -> str:
        return str(self.where[name][0].path)

    def stored_name(self, name: str) -> str:
        return self.where[name][1]

    def gguf_of(self, name: str) -> GGUFFile:
        return self.where[name][0]

    def fix_of(self, name: str) -> Fix:
        return self.where[name][2]

    def shape(self, name: str) -> tuple[int, ...]:
        f, stored, fix = self.where[name]
        shape = f.shape(stored)
        if isinstance(fix, ExpertSlice):
            return shape[1:]
        if isinstance(fix, AsRow):
            return (1, int(np.prod(shape)))
        return shape[::-1] if isinstance(fix, Transposed) else shape

    def get(self, name: str) -> np.ndarray:
        f, stored, fix = self.where[name]
        if isinstance(fix, ExpertSlice):
            return f.expert(stored, fix.expert)
        return fix(f.get(stored))

    def rows(self, name: str, index) -> np.ndarray:
        f, stored, fix = self.where[name]
        if fix is not AS_STORED:
            return self.get(name)[index]
        return f.rows(stored, index)

    def is_float32(self, name: str) -> bool:
        f, stored, fix = self.where[name]
        return (fix is AS_STORED or isinstance(fix, ExpertSlice)) and f.is_float32(stored)

    def check_readable(self, name: str) -> None:
        f, stored, _ = self.where[name]
        f.check_readable(stored)


def open_files(path: Path) -> list[GGUFFile]:
    files = [GGUFFile(p) for p in shard_paths(path)]
    for f in files[1:]:  # later shards carry only their split.* keys and tensors
        f.metadata = {**files[0].metadata, **f.metadata}
    return files


def layout_of(first: GGUFFile) -> tuple[families.Family, GGUFLayout]:
    """The family and GGUF layout of the file's general.architecture (the registry of
    io/families' GGUF_LAYOUTS), or a one-line refusal."""
    kind = first.value("general.type")
    if kind == "adapter" or first.value("adapter.type") is not None:
        raise ModelError(f"{first.path}: a LoRA adapter (general.type=adapter), not a model; open "
                         f"the base model's GGUF")
    arch = first.value("general.architecture", required=True)
    if kind == "mmproj" or arch == "clip":
        raise ModelError(f"{first.path}: only a vision tower / projector (mmproj), not a language "
                         f"model; open the model's text GGUF")
    experts = first.value(f"{arch}.expert_count", 0) if isinstance(arch, str) else 0
    return families.gguf_layout_of(arch, experts, str(first.path))


def _hf_name(layout: GGUFLayout, name: str) -> Optional[tuple[str, str, str]]:
    """(HF name, GGUF leaf, weight or bias) of a GGUF tensor name, or None for tensors the model
    does not use."""
    match = _BLOCK_TENSOR.match(name)
    if match:
        index, leaf, kind = match.groups()
        if leaf not in layout.block:
            return None
        return f"{layout.layer.format(index)}{layout.block[leaf]}.{kind}", leaf, kind
    match = _TOP_TENSOR.match(name)
    if match and match.group(1) in layout.top:
        return f"{layout.top[match.group(1)]}.{match.group(2)}", match.group(1), match.group(2)
    return None


def _experts(f: GGUFFile, name: str, layout: GGUFLayout) -> dict:
    """A 3-D experts tensor (blk.N.ffn_*_exps.weight) as one HF name per expert; its biases
    (blk.N.ffn_*_exps.bias [n_expert, out]: gpt-oss) one row per expert."""
    match = _BLOCK_TENSOR.match(name)
    if match is None or match.group(2) not in layout.expert_names:
        return {}
    layer, leaf, kind = match.groups()
    inside = layout.layer.format(layer) + layout.expert_names[leaf]
    return {f"{inside.format(e=e)}.{kind}": (f, name, ExpertSlice(e)) for e in range(f.shape(name)[0])}


def map_tensors(files: list[GGUFFile], layout: GGUFLayout, n_head: int, n_kv: int) -> dict:
    where: dict[str, tuple[GGUFFile, str, Fix]] = {}
    fixes = {"unpermute_heads": Unpermute(n_head), "unpermute_kv_heads": Unpermute(n_kv),
             "minus_one": MinusOne(), "transposed": Transposed(), "as_row": AsRow()}
    for f in files:
        for name in f.tensors:
            experts = _experts(f, name, layout)
            if experts:
                where.update(experts)
                continue
            mapped = _hf_name(layout, name)
            if mapped is None:
                continue
            hf, leaf, kind = mapped
            fix_name = layout.fix(leaf, kind)
            fix: Fix = AS_STORED if fix_name is None else fixes[fix_name]
            if fix_name == "as_row" and len(f.shape(name)) != 1:
                fix = AS_STORED
            where[hf] = (f, name, fix)
    return where
