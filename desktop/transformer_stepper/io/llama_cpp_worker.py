"""Run by io/hf_check.py as its own process (`python llama_cpp_worker.py REQUEST.json`), never
imported by the app: llama.cpp (llama-cpp-python) on a GGUF file and the app's token ids, every
position's logits written to the request's .npz (no pickle), and one JSON line printed:
{"n_threads": n} or {"error": "one sentence"}. In a process of its own because ggml's threads
and torch's fight in one, and because a native crash in llama.cpp must not take the check's
Hugging Face figures (or the app) with it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

# run as a script, its own folder (transformer_stepper/io) would come first on sys.path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def _collect_log() -> list[str]:
    """llama.cpp's log messages, gathered (not printed): why a file is refused is only there."""
    import ctypes

    import llama_cpp

    messages: list[str] = []

    @llama_cpp.llama_log_callback
    def collect(_level, text, _user_data):
        messages.append(text.decode("utf-8", "replace") if text else "")

    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    _collect_log.callback = collect          # kept alive as long as llama.cpp may call it
    return messages


def _why(messages: list[str]) -> str:
    """What llama.cpp's log says went wrong ('' when it says nothing): the loader's error first
    ("error loading model: check_tensor_dims: tensor 'blk.1.ffn_gate_inp.weight' not found")."""
    lines = [" ".join(line.split()) for line in "".join(messages).splitlines()]
    for marker in ("error loading model:", "error:", "failed"):
        for line in lines:
            if marker in line.lower():
                return line.split(marker, 1)[1].strip(" :") if marker.endswith(":") else line
    return ""


def llama_cpp_logits(model: str, ids: list[int], threads: int | None = None, overrides: dict | None = None):
    """llama.cpp's logits of every position of `ids` (n × vocabulary, float32): one batch, the
    whole text at once, as a first pass over a prompt. `overrides`: metadata llama.cpp reads
    instead of the file's (its kv_overrides)."""
    import numpy as np
    from llama_cpp import Llama

    n = len(ids)
    options = {"n_threads": threads} if threads else {}
    if overrides:
        options["kv_overrides"] = dict(overrides)
    llm = Llama(model_path=model, logits_all=True, n_ctx=max(n, 16), n_batch=max(n, 16),
                n_ubatch=max(n, 16), verbose=False, **options)
    llm.eval(list(ids))
    logits = np.asarray(llm.scores[:n], dtype=np.float32)
    return logits, llm.n_threads if hasattr(llm, "n_threads") else llm.context_params.n_threads


def main(argv: list[str]) -> int:
    import numpy as np

    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        print(json.dumps({"absent": True, "error": f"llama-cpp-python cannot be imported ({_sentence(exc)})"}))
        return 0
    messages = _collect_log()
    try:
        logits, threads = llama_cpp_logits(request["model"], request["input_ids"], request.get("threads"),
                                           request.get("overrides"))
    except Exception as exc:   # a file llama.cpp refuses: said, not raised
        why = _why(messages) or _sentence(exc)
        print(json.dumps({"error": f"llama.cpp cannot run {request['model']}: {why}"}))
        return 0
    with open(request["out"], "wb") as handle:
        np.savez(handle, logits=logits)
    print(json.dumps({"n_threads": int(threads)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
