"""The app checked against Hugging Face transformers (and llama.cpp) on the user's own model:
io/hf_check_worker.py runs them in a process of its own on the app's token ids, and the
arrays it writes are compared with the app's trace (core/analysis/reference_check.py). The app never
imports torch; without it (or transformers) the outcome is a sentence saying so."""
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
POLL = 0.1                   # seconds between looks at the worker (and at a cancel)


@dataclass(frozen=True)
class CheckOutcome:
    result: Optional[CheckResult]           # None: Hugging Face did not run (see `reason`)
    reason: str                             # why not, in one sentence ('' when it ran)
    notes: tuple[str, ...] = ()
    llama_cpp: Optional[LogitsAgreement] = None
    seconds: float = 0.0

    def lines(self) -> list[str]:
        if self.result is None:
            return [self.reason, *self.notes]
        rows = self.result.lines()
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
    """Hugging Face on `model_path` with `trace`'s ids, compared with `trace`. progress(0, 1)
    is called while it runs (a cancelled job raises there: the process is ended).
    `pythonpath`: folders put first on the worker's path (tests)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ts-check-") as folder:
        out = Path(folder) / "reference.npz"
        request = {"model": os.fspath(model_path), "kind": model_kind(trace.config),
                   "input_ids": [int(i) for i in trace.input_ids],
                   # only models with token types take them (GPT-2's would add wte[0])
                   "token_type_ids": [int(i) for i in trace.arrays["token_type_ids"]]
                   if trace.config.n_token_types else None,
                   "out": os.fspath(out)}
        (Path(folder) / "request.json").write_text(json.dumps(request), encoding="utf-8")
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join([*pythonpath, env.get("PYTHONPATH", "")])
        status, stdout, stderr = _run([python, os.fspath(WORKER), os.fspath(Path(folder) / "request.json")],
                                      env, progress)
        if status != 0:
            last = (stderr.strip().splitlines() or ["no message"])[-1]
            return CheckOutcome(None, f"the check's process failed (status {status}): {last}")
        lines = stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            answer = {}
        if "error" in answer or not out.is_file():
            return CheckOutcome(None, answer.get("error", "the check's process wrote nothing"))
        with np.load(out, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    result = check_trace(trace, arrays["hidden_states"], arrays.get("logits"), arrays.get("attentions"))
    llama = None
    if "llama_cpp_logits" in arrays and trace.has_logits:
        llama = logits_agreement(trace.logits, arrays["llama_cpp_logits"])
    return CheckOutcome(result, "", tuple(answer.get("notes", ())), llama, time.perf_counter() - start)


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
