"""A GGUF model as a checkpoint with Hugging Face's names, so the families' key maps and configs
open it like an HF folder. llama.cpp's converter changed some tensors; they are changed back here,
per tensor, on read:

  llama     q and k rows permuted for llama.cpp's interleaved rotary pairs -> HF's halves
  gemma     RMSNorm gains stored as 1 + w -> w (the family adds the 1 again)
  gpt2      Conv1D weights stored [out, in] -> [in, out]; output.weight is its own head
  qwen2/3   stored as Hugging Face has them
  experts   a mixture-of-experts layer's experts stored as one 3-D tensor each for gate, up and
            down (ffn_{gate,up,down}_exps [n_expert, out, in]): each expert is its own Hugging
            Face name, read as one slice of it (only the experts a pass routes to are read and
            dequantized); Mixtral is `llama` with llama.expert_count
Sharded files (name-00001-of-0000N.gguf) open as one model. Anything else is refused in one line."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError
from .file import GGUFFile

ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma", "gpt2", "qwen3moe", "qwen2moe", "olmoe")
MOE_ARCHITECTURES = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "olmoe": "olmoe", "llama": "mixtral"}
_SHARD = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

# GGUF leaf -> HF name inside a block, for the Llama layout and for GPT-2
_LLAMA_BLOCK = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
                "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
                "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
# the experts' tensors: GGUF leaf -> (HF projection per layout); the routers and shared expert
_EXPERTS = {"ffn_gate_exps": ("gate_proj", "w1"), "ffn_up_exps": ("up_proj", "w3"),
            "ffn_down_exps": ("down_proj", "w2")}
_MOE_BLOCK = {"ffn_gate_inp": "mlp.gate", "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
              "ffn_up_shexp": "mlp.shared_expert.up_proj", "ffn_down_shexp": "mlp.shared_expert.down_proj",
              "ffn_gate_inp_shexp": "mlp.shared_expert_gate"}
_LLAMA_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_GPT2_BLOCK = {"attn_norm": "ln_1", "ffn_norm": "ln_2", "attn_qkv": "attn.c_attn",
               "attn_output": "attn.c_proj", "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
_GPT2_TOP = {"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head"}
_GPT2_TRANSPOSED = {"attn_qkv", "attn_output", "ffn_up", "ffn_down"}


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


def architecture(first: GGUFFile) -> str:
    kind = first.value("general.type")
    if kind == "adapter" or first.value("adapter.type") is not None:
        raise ModelError(f"{first.path}: a LoRA adapter (general.type=adapter), not a model; open "
                         f"the base model's GGUF")
    arch = first.value("general.architecture", required=True)
    if kind == "mmproj" or arch == "clip":
        raise ModelError(f"{first.path}: only a vision tower / projector (mmproj), not a language "
                         f"model; open the model's text GGUF")
    experts = first.value(f"{arch}.expert_count", 0)
    if arch not in ARCHITECTURES or (experts and arch not in MOE_ARCHITECTURES):
        declared = f" with {experts} experts (a mixture of experts)" if experts else ""
        raise ModelError(f"{first.path}: GGUF architecture {arch!r}{declared} is not supported "
                         f"(supported: {', '.join(ARCHITECTURES)}, and llama with experts: Mixtral)")
    return arch


def _hf_name(arch: str, name: str, mixtral: bool = False) -> Optional[tuple[str, str]]:
    """(HF name, GGUF leaf) of a GGUF tensor name, or None for tensors the model does not use."""
    top, block = (_GPT2_TOP, _GPT2_BLOCK) if arch == "gpt2" else (_LLAMA_TOP, {**_LLAMA_BLOCK, **_MOE_BLOCK})
    if mixtral:
        block = {**block, "ffn_gate_inp": "block_sparse_moe.gate"}
    match = re.match(r"^blk\.(\d+)\.([a-z_0-9]+)\.(weight|bias)$", name)
    if match:
        index, leaf, kind = match.groups()
        if leaf not in block:
            return None
        layer = f"h.{index}." if arch == "gpt2" else f"model.layers.{index}."
        return f"{layer}{block[leaf]}.{kind}", leaf
    match = re.match(r"^([a-z_]+)\.(weight|bias)$", name)
    if match and match.group(1) in top:
        return f"{top[match.group(1)]}.{match.group(2)}", match.group(1)
    return None


def _experts(f: GGUFFile, name: str, mixtral: bool) -> dict:
    """A 3-D experts tensor (blk.N.ffn_*_exps.weight) as one HF name per expert."""
    match = re.match(r"^blk\.(\d+)\.(ffn_(?:gate|up|down)_exps)\.weight$", name)
    if match is None:
        return {}
    layer, leaf = match.groups()
    qwen, legacy = _EXPERTS[leaf]
    n_expert = f.shape(name)[0]
    if mixtral:
        return {f"model.layers.{layer}.block_sparse_moe.experts.{e}.{legacy}.weight": (f, name, ExpertSlice(e))
                for e in range(n_expert)}
    return {f"model.layers.{layer}.mlp.experts.{e}.{qwen}.weight": (f, name, ExpertSlice(e))
            for e in range(n_expert)}


def map_tensors(files: list[GGUFFile], arch: str, n_head: int, n_kv: int, mixtral: bool = False) -> dict:
    where: dict[str, tuple[GGUFFile, str, Fix]] = {}
    permute = {"attn_q": Unpermute(n_head), "attn_k": Unpermute(n_kv)}
    for f in files:
        for name in f.tensors:
            experts = _experts(f, name, mixtral)
            if experts:
                where.update(experts)
                continue
            mapped = _hf_name(arch, name, mixtral)
            if mapped is None:
                continue
            hf, leaf = mapped
            fix: Fix = AS_STORED
            if arch == "llama" and leaf in permute:
                fix = permute[leaf]
            elif arch == "gemma" and leaf.endswith("norm") and hf.endswith(".weight"):
                fix = MinusOne()
            elif arch == "gpt2" and leaf in _GPT2_TRANSPOSED and hf.endswith(".weight"):
                fix = Transposed()
            elif leaf == "ffn_gate_inp_shexp" and len(f.shape(name)) == 1:
                fix = AsRow()
            where[hf] = (f, name, fix)
    return where
