"""The app checked against Hugging Face transformers (and llama.cpp) on the user's own model:
io/hf_check_worker.py runs transformers, and for a GGUF file io/llama_cpp_worker.py runs
llama.cpp, each in a process of its own on the app's token ids; the arrays they write are
compared with the app's trace (core/analysis/reference_check.py). The app never imports torch
or llama_cpp; without them the outcome says so in a sentence."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from ..core.model.config import ModelConfig
from ..core.analysis.reference_check import (
    CheckResult,
    LogitsAgreement,
    check_trace,
    logits_agreement)

WORKER = Path(__file__).resolve().with_name("hf_check_worker.py")
LLAMA_CPP_WORKER = Path(__file__).resolve().with_name("llama_cpp_worker.py")
LLAMA_CPP_ABSENT = "llama-cpp-python is not installed: llama.cpp's own logits are not compared"
POLL = 0.1                   # seconds between looks at the worker (and at a cancel)


@dataclass(frozen=True)
class CheckOutcome:
    result: Optional[CheckResult]           # None: Hugging Face did not run (see `reason`)
    reason: str                             # why not, in one sentence ('' when it ran)
    notes: tuple[str, ...] = ()
    llama_cpp: Optional[LogitsAgreement] = None
    seconds: float = 0.0

    def lines(self) -> list[str]:
        rows = [self.reason] if self.result is None else self.result.lines()
        if self.llama_cpp is not None:
            rows.append(f"llama.cpp: top-1 agreement {100 * self.llama_cpp.top1_agree:.1f} %, logits "
                        f"correlation {self.llama_cpp.correlation:.6f}, largest gap {self.llama_cpp.max_abs:.3g} "
                        "(llama.cpp rounds activations to 8 bits inside its quantized products)")
        return rows + list(self.notes)


def model_kind(config: ModelConfig) -> str:
    """Which Hugging Face class runs the model: its own output head or the bare encoder/decoder."""
    if config.lm_head:
        return "causal-lm" if config.causal else "masked-lm"
    return "base"


def run_check(model_path: str, trace, progress: Optional[Callable[[int, int], None]] = None,
              python: str = sys.executable, pythonpath: Sequence[str] = ()) -> CheckOutcome:
    """Hugging Face on `model_path` with `trace`'s ids, compared with `trace`; for a .gguf file
    llama.cpp's logits too (whether or not transformers could read it). progress(0, 1)
    is called while they run (a cancelled job raises there: the process is ended).
    `pythonpath`: folders put first on the workers' path (tests)."""
    start = time.perf_counter()
    hf, reason, notes = _run_hugging_face(model_path, trace, progress, python, pythonpath)
    llama = None
    if os.fspath(model_path).lower().endswith(".gguf") and trace.has_logits:
        logits, why = llama_cpp_logits(model_path, trace.input_ids, progress, python, pythonpath)
        if logits is not None:
            try:
                llama = logits_agreement(trace.logits, logits)
            except ValueError as exc:
                notes.append(f"llama.cpp's {exc}: not compared")
        else:
            notes.append(why)
    result = None
    if hf is not None:
        result = check_trace(trace, hf["hidden_states"], hf.get("logits"), hf.get("attentions"))
    return CheckOutcome(result, reason, tuple(notes), llama, time.perf_counter() - start)


def _run_hugging_face(model_path, trace, progress, python, pythonpath) -> tuple[Optional[dict], str, list[str]]:
    """The worker's arrays and notes, or None and why not in one sentence."""
    with tempfile.TemporaryDirectory(prefix="ts-check-") as folder:
        out = Path(folder) / "reference.npz"
        request = {"model": os.fspath(model_path), "kind": model_kind(trace.config),
                   "input_ids": [int(i) for i in trace.input_ids],
                   # only models with token types take them (GPT-2's would add wte[0])
                   "token_type_ids": [int(i) for i in trace.arrays["token_type_ids"]]
                   if trace.config.n_token_types else None,
                   "out": os.fspath(out)}
        answer, why = _ask(WORKER, request, folder, progress, python, pythonpath)
        if answer is None or "error" in answer or not out.is_file():
            if answer is None:
                return None, f"the check's {why}", []
            return None, answer.get("error", "the check's process wrote nothing"), []
        with np.load(out, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}, "", list(answer.get("notes", ()))


def llama_cpp_logits(model_path, input_ids, progress: Optional[Callable[[int, int], None]] = None,
                     python: str = sys.executable, pythonpath: Sequence[str] = (),
                     threads: Optional[int] = None, overrides: Optional[dict] = None
                     ) -> tuple[Optional[np.ndarray], str]:
    """llama.cpp's logits (positions × vocabulary) of a GGUF file on these ids, computed in a
    process of its own (io/llama_cpp_worker.py), or None and why not in one sentence.
    `overrides`: metadata llama.cpp reads instead of the file's (str, int, float or bool)."""
    with tempfile.TemporaryDirectory(prefix="ts-llama-cpp-") as folder:
        out = Path(folder) / "logits.npz"
        request = {"model": os.fspath(model_path), "input_ids": [int(i) for i in input_ids],
                   "threads": threads, "overrides": overrides, "out": os.fspath(out)}
        answer, why = _ask(LLAMA_CPP_WORKER, request, folder, progress, python, pythonpath)
        if answer is None:
            return None, f"llama.cpp's {why}"
        if answer.get("absent"):
            return None, LLAMA_CPP_ABSENT
        if "error" in answer or not out.is_file():
            return None, answer.get("error", "llama.cpp's process wrote nothing")
        with np.load(out, allow_pickle=False) as archive:
            return archive["logits"], ""


def _ask(worker: Path, request: dict, folder: str, progress, python: str,
         pythonpath: Sequence[str]) -> tuple[Optional[dict], str]:
    """Runs a worker script on a request written into `folder`: its last JSON line, or None
    and why (a process that failed or printed nothing readable)."""
    path = Path(folder) / f"{worker.stem}.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([*pythonpath, env.get("PYTHONPATH", "")])
    status, stdout, stderr = _run([python, os.fspath(worker), os.fspath(path)], env, progress)
    if status != 0:
        last = (_error_line(stderr) or "no message")
        return None, f"process failed (status {status}): {last}"
    lines = stdout.strip().splitlines()
    try:
        return (json.loads(lines[-1]) if lines else {}), ""
    except json.JSONDecodeError:
        return {}, ""


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _run(command: list[str], env: dict, progress) -> tuple[int, str, str]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        try:
            while process.poll() is None:
                if progress is not None:
                    progress(0, 1)
                try:
                    process.wait(POLL)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if process.poll() is None:     # cancelled (or interrupted): end it
                process.kill()
                process.wait()
        out.seek(0)
        err.seek(0)
        return (process.returncode, out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace"))
