"""Session files (`.stepper`, JSON): what reproduces a view — the model (path and fingerprint),
the text (and the tokens generated after it), Compare's sentences and word, the tab, stage,
layer, head, selected token, softmax temperature, interventions and generation settings.

A session file is untrusted input: every field is checked (type, range, known names) and a bad
one is refused with one line naming the file and the field. No Qt here.

The model's fingerprint is a sampled SHA-256, cheap on a multi-gigabyte folder yet sure to
change when the weights do: for each weight file (*.safetensors, *.npz, *.gguf) its size, its
whole safetensors header (every tensor's name, dtype, shape and offsets) or first MiB, and its
last MiB; for config.json and tokenizer.json the whole file. File times are not hashed (a copy
of the same model matches)."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from ..core.model import stages
from ..core.model.errors import ModelError
from ..core.model.interventions import (
    AblateHead,
    DisableExpert,
    ForceExpert,
    HeadTemperature,
    NoPositions,
    ShufflePositions,
    SwapEmbedding)
from ..core.analysis.walks import TABS

FORMAT = "transformer-stepper session"
VERSION = 1
SAMPLE = 1 << 20
WEIGHT_SUFFIXES = (".safetensors", ".npz", ".gguf")
SMALL_FILES = ("config.json", "tokenizer.json")
BUILTIN = "builtin"


def model_fingerprint(path: Optional[str]) -> str:
    """'builtin' for the built-in model, else 'sha256:<hex>' of the sampled files (see above)."""
    if not path:
        return BUILTIN
    root = Path(path).expanduser()
    files = [root] if root.is_file() else sorted(p for p in root.iterdir()
                                                  if p.suffix in WEIGHT_SUFFIXES or p.name in SMALL_FILES)
    digest = hashlib.sha256()
    try:
        for file in files:
            digest.update(file.name.encode() + b"\0")
            with open(file, "rb") as handle:
                if file.name in SMALL_FILES:
                    digest.update(handle.read())
                    continue
                size = file.stat().st_size
                digest.update(str(size).encode() + b"\0")
                head = handle.read(8)
                if file.suffix == ".safetensors" and len(head) == 8:
                    n = int.from_bytes(head, "little")
                    digest.update(head + handle.read(min(n, 100 << 20)))
                else:
                    digest.update(head + handle.read(SAMPLE))
                handle.seek(max(0, size - SAMPLE))
                digest.update(handle.read(SAMPLE))
    except OSError as exc:
        raise ModelError(f"{root}: cannot read it to check the model ({exc.strerror or exc})") from None
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class SessionData:
    model_path: Optional[str]                       # None: the built-in model
    model_name: str
    fingerprint: str
    text: str                                       # what was typed (generated tokens apart)
    generated_ids: tuple[int, ...] = ()             # tokens generated after the text, in order
    sentences: tuple[str, ...] = ()
    word: str = ""
    tab: str = "stepper"
    stage: str = "tokenize"
    layer: int = 0
    head: int = 0
    selected: int = 0
    temperature: float = 1.0
    interventions: tuple = ()
    show_intervened: bool = False
    sampling: dict = field(default_factory=lambda: {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0})


def _intervention_dict(item) -> dict:
    kinds = {AblateHead: "ablate_head", HeadTemperature: "head_temperature", NoPositions: "no_positions",
             ShufflePositions: "shuffle_positions", SwapEmbedding: "swap_embedding",
             DisableExpert: "disable_expert", ForceExpert: "force_expert"}
    return {"kind": kinds[type(item)], **asdict(item)}


def to_json(data: SessionData) -> str:
    body = {"format": FORMAT, "version": VERSION,
            "model": {"path": data.model_path, "name": data.model_name, "fingerprint": data.fingerprint},
            "text": data.text, "generated_ids": list(data.generated_ids),
            "compare": {"sentences": list(data.sentences), "word": data.word},
            "view": {"tab": data.tab, "stage": data.stage, "layer": data.layer, "head": data.head,
                     "selected": data.selected, "temperature": data.temperature,
                     "show_intervened": data.show_intervened},
            "interventions": [_intervention_dict(i) for i in data.interventions],
            "generation": dict(data.sampling)}
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


def write_session(path: Path, data: SessionData) -> None:
    from .array_export import write_bytes

    write_bytes(Path(path), to_json(data).encode("utf-8"))       # ModelError names the file


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str):
        raise ModelError(f"{self.path}: {where} {problem}")

    def obj(self, value, where: str, keys: tuple) -> dict:
        if not isinstance(value, dict):
            self.fail(where, "must be an object")
        for key in keys:
            if key not in value:
                self.fail(f"{where}.{key}", "is missing")
        return value

    def string(self, value, where: str, limit: int = 100_000) -> str:
        if not isinstance(value, str) or len(value) > limit:
            self.fail(where, f"must be a string of at most {limit} characters")
        return value

    def integer(self, value, where: str, low: int = 0, high: int = 1 << 31) -> int:
        if type(value) is not int or not low <= value <= high:
            self.fail(where, f"must be an integer from {low} to {high}")
        return value

    def number(self, value, where: str, low: float, high: float) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            self.fail(where, f"must be a number from {low:g} to {high:g}")
        return float(value)


def read_session(path: Path) -> SessionData:
    path = Path(path)
    try:
        raw = path.read_bytes()
        if len(raw) > 64 << 20:
            raise ModelError(f"{path}: too large for a session file ({len(raw):,} bytes)")
        body = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise ModelError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"{path}: not a session file (not JSON: {exc})") from None
    c = _Checker(path)
    c.obj(body, "the file", ("format", "version", "model", "text", "view"))
    if body["format"] != FORMAT:
        c.fail("format", f"must be {FORMAT!r}")
    if body["version"] != VERSION:
        c.fail("version", f"{body['version']!r} is not one this app reads (it reads {VERSION})")
    model = c.obj(body["model"], "model", ("path", "name", "fingerprint"))
    model_path = None if model["path"] is None else c.string(model["path"], "model.path", 4096)
    view = c.obj(body["view"], "view", ("tab", "stage", "layer", "head", "selected"))
    tab, stage = view["tab"], view["stage"]
    if tab not in TABS:
        c.fail("view.tab", f"must be one of {', '.join(TABS)}")
    if stage not in [s.key for s in stages.STAGES]:
        c.fail("view.stage", f"{stage!r} is not a stage")
    ids = body.get("generated_ids", [])
    if not isinstance(ids, list) or len(ids) > 100_000:
        c.fail("generated_ids", "must be a list of token ids")
    compare = c.obj(body.get("compare", {"sentences": [], "word": ""}), "compare", ("sentences", "word"))
    sentences = compare["sentences"]
    if not isinstance(sentences, list) or len(sentences) > 64:
        c.fail("compare.sentences", "must be a list of at most 64 strings")
    generation = c.obj(body.get("generation", {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}),
                       "generation", ("temperature", "top_k", "top_p", "seed"))
    return SessionData(
        model_path=model_path, model_name=c.string(model["name"], "model.name", 1000),
        fingerprint=c.string(model["fingerprint"], "model.fingerprint", 200),
        text=c.string(body["text"], "text"),
        generated_ids=tuple(c.integer(i, f"generated_ids[{n}]") for n, i in enumerate(ids)),
        sentences=tuple(c.string(s, f"compare.sentences[{n}]", 10_000) for n, s in enumerate(sentences)),
        word=c.string(compare["word"], "compare.word", 1000), tab=tab, stage=stage,
        layer=c.integer(view["layer"], "view.layer", 0, 100_000), head=c.integer(view["head"], "view.head", 0, 100_000),
        selected=c.integer(view["selected"], "view.selected", 0, 10_000_000),
        temperature=c.number(view.get("temperature", 1.0), "view.temperature", 1e-3, 1000),
        show_intervened=_flag(c, view.get("show_intervened", False), "view.show_intervened"),
        interventions=_interventions(c, body.get("interventions", [])),
        sampling={"temperature": c.number(generation["temperature"], "generation.temperature", 0, 100),
                  "top_k": c.integer(generation["top_k"], "generation.top_k", 0, 10_000_000),
                  "top_p": c.number(generation["top_p"], "generation.top_p", 1e-9, 1),
                  "seed": c.integer(generation["seed"], "generation.seed", 0, 2**63 - 1)})


def _flag(c: _Checker, value, where: str) -> bool:
    if not isinstance(value, bool):
        c.fail(where, "must be true or false")
    return value


def _interventions(c: _Checker, items) -> tuple:
    if not isinstance(items, list) or len(items) > 10_000:
        c.fail("interventions", "must be a list")
    made = []
    for n, item in enumerate(items):
        where = f"interventions[{n}]"
        c.obj(item, where, ("kind",))
        kind = item["kind"]
        if kind == "ablate_head":
            if item.get("mode", "zero") not in ("zero", "mean"):
                c.fail(f"{where}.mode", "must be zero or mean")
            made.append(AblateHead(c.integer(item.get("layer"), f"{where}.layer"),
                                   c.integer(item.get("head"), f"{where}.head"), item.get("mode", "zero")))
        elif kind == "head_temperature":
            made.append(HeadTemperature(c.integer(item.get("layer"), f"{where}.layer"),
                                        c.integer(item.get("head"), f"{where}.head"),
                                        c.number(item.get("temperature"), f"{where}.temperature", 1e-3, 1000)))
        elif kind == "no_positions":
            made.append(NoPositions())
        elif kind == "shuffle_positions":
            made.append(ShufflePositions(c.integer(item.get("seed", 0), f"{where}.seed")))
        elif kind == "swap_embedding":
            made.append(SwapEmbedding(c.integer(item.get("position"), f"{where}.position"),
                                      c.integer(item.get("token_id"), f"{where}.token_id")))
        elif kind == "disable_expert":
            made.append(DisableExpert(c.integer(item.get("layer"), f"{where}.layer"),
                                      c.integer(item.get("expert"), f"{where}.expert")))
        elif kind == "force_expert":
            made.append(ForceExpert(c.integer(item.get("layer"), f"{where}.layer"),
                                    c.integer(item.get("position"), f"{where}.position"),
                                    c.integer(item.get("expert"), f"{where}.expert")))
        else:
            c.fail(f"{where}.kind", f"{kind!r} is not an intervention")
    return tuple(made)
