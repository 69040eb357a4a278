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


def llama_cpp_logits(model: str, ids: list[int], threads: int | None = None):
    """llama.cpp's logits of every position of `ids` (n × vocabulary, float32): one batch, the
    whole text at once, as a first pass over a prompt."""
    import numpy as np
    from llama_cpp import Llama

    n = len(ids)
    options = {"n_threads": threads} if threads else {}
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
    try:
        logits, threads = llama_cpp_logits(request["model"], request["input_ids"], request.get("threads"))
    except Exception as exc:   # a file llama.cpp refuses: said, not raised
        print(json.dumps({"error": f"llama.cpp cannot run {request['model']}: {_sentence(exc)}"}))
        return 0
    with open(request["out"], "wb") as handle:
        np.savez(handle, logits=logits)
    print(json.dumps({"n_threads": int(threads)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
