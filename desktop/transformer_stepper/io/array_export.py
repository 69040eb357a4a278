"""Writing a trace's arrays: one stage's arrays as .npy or labelled .csv, the whole trace as .npz
(the names of `transformer-stepper trace`); DATA_FORMATS is the registry the export dialog reads.
No Qt; every file is written to a temporary name beside its target and renamed, so a failure
never leaves half a file.

    for array in stage_arrays(trace, "scores", layer=0, head=1):
        save_csv(folder / array_file_name(stage("scores"), array.name, 0, 1, "csv"), array)
"""
from __future__ import annotations

import csv
import errno
import io
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Sequence

import numpy as np

from ..core.model.errors import ModelError
from ..core.trace.generate import cached_lens
from ..core.model import stages
from ..core.model.stages import Stage
from ..core.trace.trace import Trace


# -- atomic writes -----------------------------------------------------------------------------
def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> bool:
    """Write through `write(file)` to `.NAME.<random>.part` beside `path`, then rename it over
    `path`. -> True if an existing file was replaced. Any OSError becomes one ModelError line
    naming the file; the temporary file is removed whatever happens."""
    path = Path(path)
    check_name_length(path)
    try:
        if not path.parent.is_dir():
            raise ModelError(f"{path.parent}: folder does not exist")
        if path.is_dir():
            raise ModelError(f"{path}: is a folder")
        replaced = path.exists()
    except OSError as exc:
        raise ModelError(f"{path}: cannot write ({_reason(exc)})") from None
    # 0666 through O_EXCL honours the umask (mkstemp's 0600 would stick to the result). The
    # temporary name is short whatever the target's: any name legal for the result fits
    tmp = path.parent / short_temporary_name()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise ModelError(f"{path}: cannot write ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ModelError(f"{path}: cannot write ({_reason(exc)})") from None
        raise
    return replaced


def short_temporary_name(suffix: str = ".part") -> str:
    return f".ts{uuid.uuid4().hex[:10]}{suffix}"


def check_name_length(path: Path) -> None:
    """A name longer than the file system allows, in one line (before any work is done)."""
    try:
        limit = os.pathconf(path.parent if path.parent.is_dir() else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    size = len(os.fsencode(path.name))
    if size > limit:
        raise ModelError(f"{path.parent / path.name[:40]}…: the name is {size} bytes long; the file system "
                         f"allows {limit}")


def write_bytes(path: Path, data: bytes) -> bool:
    """-> True if an existing file was replaced."""
    return atomic_write(path, lambda handle: handle.write(data))


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "permission denied" if exc.errno != errno.EROFS else "read-only file system"
    return exc.strerror or str(exc) or type(exc).__name__


def prepare_folder(folder: Path) -> Path:
    """The output folder, created if its parent exists; a ModelError if it cannot be used."""
    folder = Path(folder)
    check_name_length(folder)
    if folder.exists() and not folder.is_dir():
        raise ModelError(f"{folder}: is a file, not a folder")
    if not folder.exists():
        if not folder.parent.is_dir():
            raise ModelError(f"{folder.parent}: folder does not exist")
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise ModelError(f"{folder}: cannot create the folder ({_reason(exc)})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ModelError(f"{folder}: cannot write (permission denied)")
    return folder


# -- what lies behind each stage ------------------------------------------------------------
@dataclass(frozen=True)
class StageArray:
    """One array of a stage at the chosen layer/head, with what its rows and columns are."""
    name: str                                # the trace's name (`scores`, `q`, ...)
    values: np.ndarray                       # 1-D or 2-D
    rows: Optional[Sequence[str]] = None     # a label per row (tokens), None: numbered
    columns: Optional[Sequence[str]] = None  # a label per column, None: numbered `name[j]`


# what a column of each array is (token axes get the tokens, the rest numbered)
_KEY_COLUMNS = {"scores_raw", "scores", "attn_weights", "mask"}
_COLUMN_NAMES = {"offsets": ["start", "end"], "input_ids": ["id"],
                 "special_tokens_mask": ["special"], "token_type_ids": ["token_type"]}


def stage_arrays(trace: Trace, stage_key: str, layer: int, head: int,
                 vocabulary: Optional[Callable[[int], str]] = None) -> list[StageArray]:
    """The trace arrays behind a stage at `layer`/`head`, as 1-D/2-D arrays whose rows are the
    text's tokens (query tokens for scores and weights, whose columns are the key tokens).
    `vocabulary(id) -> piece` names the columns of logits."""
    arrays = stages.stage(stage_key).arrays  # a KeyError names an unknown stage
    config = trace.config
    if not 0 <= layer < config.n_layer:
        raise ModelError(f"layer {layer}: the model has {config.n_layer} layers (0–{config.n_layer - 1})")
    if not 0 <= head < config.n_head:
        raise ModelError(f"head {head}: the model has {config.n_head} heads (0–{config.n_head - 1})")
    tokens = list(trace.tokens)
    key_columns = [f"{j}:{token}" for j, token in enumerate(tokens)]
    if stage_key == "logit_lens":
        return _lens_arrays(trace, tokens)
    out = []
    for name, index in arrays:
        if name == "mask":
            values = trace.mask
            if values is None:
                continue
        elif name in ("input_ids", "offsets", "special_tokens_mask"):
            values = getattr(trace, name)
        elif name not in trace:
            continue          # not in this family (token types in GPT-2, ln_f in BERT, ...)
        elif index == "layer":
            values = trace.layer(name, layer)          # this layer's only (not every layer's)
        elif index == "head":
            values = trace.head_array(name, layer, head)
        else:
            values = trace[name]
        columns = _COLUMN_NAMES.get(name)
        if name in _KEY_COLUMNS:
            columns = key_columns
        elif name == "logits" and vocabulary is not None:
            columns = [f"{j}:{vocabulary(j)}" for j in range(values.shape[1])]
        out.append(StageArray(name, values, tokens, columns))
    return out


def _lens_arrays(trace: Trace, tokens: list[str]) -> list[StageArray]:
    """Rows: the tokens; columns: the hidden states (embedding output, then each layer)."""
    result = cached_lens(trace)
    if result is None:
        return []
    states = ["embedding"] + [f"layer {i}" for i in range(trace.config.n_layer)]
    return [StageArray("lens_top_token_id", result.ids[:, :, 0].T, tokens, states),
            StageArray("lens_top_probability", result.probabilities[:, :, 0].T, tokens, states),
            StageArray("lens_final_token_probability", result.final_probabilities.T, tokens, states)]


def array_file_name(stage: Stage, name: str, layer: int, head: int, extension: str) -> str:
    """`06-scores-scores_raw-L0H1.csv`: the layer and head only where the stage has them."""
    return f"{stage.number:02d}-{stage.key}-{name}{layer_head_suffix(stage, layer, head)}.{extension}"


def layer_head_suffix(stage: Stage, layer: int, head: int) -> str:
    if stage.per_head:
        return f"-L{layer}H{head}"
    if stage.per_layer:
        return f"-L{layer}"
    return ""


# -- writers ----------------------------------------------------------------------------------------
def save_npy(path: Path, values: np.ndarray) -> bool:
    """The array exactly (dtype and shape), without pickle. -> True if a file was replaced."""
    values = np.asarray(values)
    return atomic_write(path, lambda handle: np.save(handle, values, allow_pickle=False))


def save_npz(path: Path, trace: Trace) -> bool:
    """The whole trace under the names `transformer-stepper trace` writes (Trace.to_dict())."""
    arrays = trace.to_dict()
    return atomic_write(path, lambda handle: np.savez(handle, **arrays))


def save_csv(path: Path, array: StageArray) -> bool:
    """A table with a header row; each row starts with its position and its token. Floats are
    written as the shortest text that reads back as the same float32; -inf stays -inf."""
    return atomic_write(path, lambda handle: handle.write(csv_bytes(array)))


def csv_bytes(array: StageArray) -> bytes:
    values = np.asarray(array.values)
    table = values.reshape(len(values), -1) if values.ndim != 2 else values
    n_rows, n_columns = table.shape
    columns = list(array.columns) if array.columns is not None else (
        [array.name] if values.ndim == 1 else [f"{array.name}[{j}]" for j in range(n_columns)])
    if len(columns) != n_columns:
        raise ValueError(f"{array.name}: {len(columns)} column labels for {n_columns} columns")
    rows = list(array.rows) if array.rows is not None else None
    if rows is not None and len(rows) != n_rows:
        raise ValueError(f"{array.name}: {len(rows)} row labels for {n_rows} rows")
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["position", "token", *columns] if rows is not None else ["row", *columns])
    cells = _cells(table)
    for i in range(n_rows):
        label = [i, rows[i]] if rows is not None else [i]
        writer.writerow([*label, *cells[i]])
    return text.getvalue().encode("utf-8")


def _cells(table: np.ndarray) -> list[list[str]]:
    if table.dtype == np.bool_:
        return table.astype(np.int8).astype(str).tolist()
    if table.dtype.kind in "iu":
        return table.astype(str).tolist()
    # str() of a float32 scalar is its shortest round-trip repr ('0.1', '-inf', 'nan')
    return [[str(v) for v in row] for row in table.astype(np.float32, copy=False)]


# -- a stage's arrays and the whole trace, into a folder ------------------------------------------
TRACE_FILE = "trace.npz"


@dataclass(frozen=True)
class DataFormat:
    """How trace data is stored: per array of a stage (`write(path, StageArray)`) or, with
    `whole_trace`, the whole trace in one file `file_name` (`write(path, Trace)`). The export
    dialog offers one check box per entry, its `label` ("{stage}" names the stage shown)."""
    name: str                   # the files' extension, and what callers ask for ("csv")
    label: str
    write: Callable[[Path, object], bool]
    whole_trace: bool = False
    file_name: str = ""


# the data formats, in the order the dialog lists them and their files are written
DATA_FORMATS: tuple[DataFormat, ...] = (
    DataFormat("csv", "Arrays of {stage} as .csv, tokens on rows and columns", save_csv),
    DataFormat("npy", "… and as .npy (exact float32)", lambda path, array: save_npy(path, array.values)),
    DataFormat("npz", "The whole trace as trace.npz (the names of `transformer-stepper trace`)", save_npz,
               whole_trace=True, file_name=TRACE_FILE),
)


def data_files(trace: Trace, stage: Stage, layer: int, head: int, formats: Sequence[str],
               vocabulary: Optional[Callable[[int], str]] = None) -> list[tuple[str, Callable[[Path], bool]]]:
    """-> (file name, write(path) -> replaced) for the stage's arrays in each per-array format
    of `formats` ("csv", "npy") and each whole-trace one ("npz": trace.npz)."""
    unknown = set(formats) - {f.name for f in DATA_FORMATS}
    if unknown:
        raise ValueError(f"unknown data formats {sorted(unknown)}")
    chosen = [f for f in DATA_FORMATS if f.name in formats]
    per_array = [f for f in chosen if not f.whole_trace]
    files: list[tuple[str, Callable[[Path], bool]]] = []
    arrays = stage_arrays(trace, stage.key, layer, head, vocabulary) if per_array else []
    for array in arrays:
        for f in per_array:
            files.append((array_file_name(stage, array.name, layer, head, f.name),
                          lambda path, f=f, a=array: f.write(path, a)))
    for f in chosen:
        if f.whole_trace:
            files.append((f.file_name, lambda path, f=f: f.write(path, trace)))
    return files


def write_data_files(folder: Path, files: Sequence[tuple[str, Callable[[Path], bool]]]) -> list[tuple[Path, bool]]:
    """Write every file of `data_files` into `folder` (created if its parent exists).
    -> (path, replaced an existing file) for each; the first failure raises ModelError."""
    folder = prepare_folder(folder)
    return [(folder / name, write(folder / name)) for name, write in files]
