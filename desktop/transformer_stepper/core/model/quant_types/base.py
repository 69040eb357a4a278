"""The registry and the shape every quant type shares: weight i of sub-block j is
w[i] = scale[j] · level(q[i]) − min[j], where q is the stored integer code, level the integer (or
table value) it stands for, scale[j] the sub-block's effective scale (d, d · sc[j] ...) and min[j]
its effective min (types with mins only). A type decodes its bytes into these arrays; the value
arithmetic, the per-weight steps and the sub-block table are written once, here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np

from ..errors import ModelError

QUANT_TYPES: dict[str, type["QuantType"]] = {}


@dataclass(frozen=True)
class Decoded:
    """n blocks of one quant type, decoded; every array has the blocks first."""
    codes: np.ndarray                   # [n, block_size] int32: the stored integer code of each weight
    d: np.ndarray                       # [n] float32: the block's (super-)scale
    scales: np.ndarray                  # [n, n_sub] float32: each sub-block's effective scale
    values: np.ndarray                  # [n, block_size] float32: the weights
    dmin: Optional[np.ndarray] = None   # [n] float32: the super-min (types with mins)
    mins: Optional[np.ndarray] = None   # [n, n_sub] float32: each sub-block's effective min
    sub_scales: Optional[np.ndarray] = None   # [n, n_sub] int32: stored integer sub-block scales
    sub_mins: Optional[np.ndarray] = None     # [n, n_sub] int32: stored integer sub-block mins


def f16(raw: np.ndarray) -> np.ndarray:
    """[n, 2] uint8 -> [n] float32 (a stored float16, exactly)."""
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32).reshape(-1)


def nibbles(raw: np.ndarray) -> np.ndarray:
    """[n, m] uint8 -> [n, 2, m]: low nibbles, then high nibbles."""
    return np.stack([raw & 0x0F, raw >> 4], axis=1)


class QuantType:
    """One ggml block type. Subclasses give the layout facts and `decode_fields`."""
    name: ClassVar[str]
    block_size: ClassVar[int]           # weights per block
    type_size: ClassVar[int]            # bytes per block
    sub_block_size: ClassVar[int]       # weights sharing one scale (and min)
    code_range: ClassVar[tuple[int, int]]   # the stored codes' grid, inclusive
    formula: ClassVar[str]              # the dequantization, in one line
    level_text: ClassVar[str] = "q"     # what the code stands for, in the formula's words
    scale_text: ClassVar[str] = "d"     # the effective scale, in the formula's words
    d_label: ClassVar[str] = "d (float16 scale of the block)"
    sc_label: ClassVar[str] = "sc"      # the stored sub-block scale's column header
    sc_offset: ClassVar[int] = 0        # the stored sc means sc − sc_offset (Q3_K, IQ4_XS: 32)
    levels_table: ClassVar[Optional[tuple[int, ...]]] = None   # non-linear grids: code -> level
    has_mins: ClassVar[bool] = False    # w = ... − min[j] (Q2_K, Q4_K, Q5_K), or + m (Q4_1, Q5_1)
    min_plus: ClassVar[bool] = False    # the min is added (Q4_1, Q5_1: w = d · q + m)

    def __init_subclass__(cls, name: str = "", **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if name:
            cls.name = name
            QUANT_TYPES[name] = cls

    def __init__(self) -> None:
        raise TypeError("quant types are classes, not instances")

    # -- what a type defines -------------------------------------------------------------------
    @classmethod
    def decode_fields(cls, blocks: np.ndarray) -> dict:
        """[n, type_size] uint8 -> codes, d, scales (and dmin, mins, sub_scales, sub_mins)."""
        raise NotImplementedError

    @classmethod
    def levels(cls, codes: np.ndarray) -> np.ndarray:
        """The value each code stands for, as float32 (q − 8, q − 32, a table entry ...)."""
        if cls.levels_table is not None:
            return np.asarray(cls.levels_table, np.int8)[codes].astype(np.float32)
        return codes.astype(np.float32)

    # -- written once ------------------------------------------------------------------------
    @classmethod
    def decode(cls, blocks: np.ndarray) -> Decoded:
        blocks = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1, cls.type_size)
        fields = cls.decode_fields(blocks)
        n = blocks.shape[0]
        shape = (n, cls.block_size // cls.sub_block_size, cls.sub_block_size)
        # gguf-py's order: (effective scale) · level, then − (effective min), in float32
        values = fields["scales"].reshape(n, -1, 1) * cls.levels(fields["codes"]).reshape(shape)
        if fields.get("mins") is not None:
            mins = fields["mins"].reshape(n, -1, 1)
            values = values + mins if cls.min_plus else values - mins
        return Decoded(values=values.reshape(n, cls.block_size).astype(np.float32, copy=False), **fields)

    @classmethod
    def dequantize(cls, blocks: np.ndarray) -> np.ndarray:
        """[..., k · type_size] uint8 -> [..., k · block_size] float32: the plain numpy path."""
        blocks = np.asarray(blocks, dtype=np.uint8)
        out = cls.decode(blocks.reshape(-1, cls.type_size)).values
        return out.reshape(*blocks.shape[:-1], blocks.shape[-1] // cls.type_size * cls.block_size)

    @classmethod
    def steps(cls, decoded: Decoded, b: int, k: int) -> list[tuple[str, float]]:
        """The stored numbers and the arithmetic that give weight k of block b, each
        (label, value) in float32; the last value is decoded.values[b, k]."""
        j, q = k // cls.sub_block_size, int(decoded.codes[b, k])
        out: list[tuple[str, float]] = [(cls.d_label, float(decoded.d[b]))]
        scale = float(decoded.scales[b, j])
        if decoded.sub_scales is not None:
            out.append((f"{cls.sc_label}[{j}] (stored scale of sub-block {j})", int(decoded.sub_scales[b, j])))
            out.append((cls.scale_text.replace("[j]", f"[{j}]"), scale))
        if decoded.sub_mins is not None:
            out.append(("dmin (float16 super-min)", float(decoded.dmin[b])))
            out.append((f"m[{j}] (stored min of sub-block {j})", int(decoded.sub_mins[b, j])))
            out.append((f"dmin · m[{j}]", float(decoded.mins[b, j])))
        elif decoded.mins is not None:
            out.append(("m (float16 min of the block)", float(decoded.mins[b, j])))
        level = float(cls.levels(np.array([q]))[0])
        out.append((f"q[{k}] (stored code)", q))
        if cls.level_text != "q":
            out.append((f"{cls.level_text.replace('q', f'q[{k}]')} (the level code {q} stands for)", level))
        rule = f"{cls.scale_text.replace('[j]', f'[{j}]')} · {cls.level_text}"
        numbers = f"{_g(scale)} · {_level_number(cls, q, level)}"
        if decoded.mins is not None and cls.min_plus:
            rule, numbers = rule + " + m", numbers + f" + {_g(decoded.mins[b, j])}"
        elif decoded.mins is not None:
            rule, numbers = rule + f" − dmin·m[{j}]", numbers + f" − {_g(decoded.mins[b, j])}"
        out.append((f"w = {rule} = {numbers}", float(decoded.values[b, k])))
        return out

    @classmethod
    def sub_block_table(cls, decoded: Decoded, b: int) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
        """(headers, rows as text) of block b's sub-blocks: the stored scale (and min) and
        their effective values. Empty for types with one scale per block."""
        if decoded.sub_scales is None:
            return (), []
        heads = ["j", cls.sc_label]
        if cls.sc_offset:
            heads.append(f"{cls.sc_label} − {cls.sc_offset}")
        heads.append(cls.scale_text.replace("[j]", ""))
        if decoded.mins is not None:
            heads += ["m", "dmin·m"]
        rows = []
        for j in range(decoded.sub_scales.shape[1]):
            sc = int(decoded.sub_scales[b, j])
            row = [str(j), str(sc)] + ([str(sc - cls.sc_offset)] if cls.sc_offset else [])
            row.append(f"{float(decoded.scales[b, j]):.6g}")
            if decoded.mins is not None:
                row += [str(int(decoded.sub_mins[b, j])), f"{float(decoded.mins[b, j]):.6g}"]
            rows.append(tuple(row))
        return tuple(heads), rows


def _g(value) -> str:
    return f"{float(value):.7g}"


def _level_number(cls, q: int, level: float) -> str:
    if cls.level_text == "q":
        return str(q)
    if cls.levels_table is not None:
        return f"{_g(level)}"
    return cls.level_text.replace("q", str(q))          # "(q − 32)" -> "(37 − 32)"


def quant_type(name: str) -> type[QuantType]:
    """The registered class of quant type `name`, or a one-line ModelError."""
    try:
        return QUANT_TYPES[name]
    except KeyError:
        raise ModelError(f"quant type {name} has no block decoder (decoded: "
                         f"{', '.join(sorted(QUANT_TYPES))})") from None
