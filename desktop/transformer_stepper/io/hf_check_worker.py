"""Run by io/hf_check.py as its own process (`python hf_check_worker.py REQUEST.json`), never
imported by the app: torch's and numpy's thread pools fight in one process, and the app must
run without torch. Reads the request (model path, what kind of model, the app's token ids),
runs Hugging Face transformers on them (fp32, eager attention; a GGUF through transformers'
own GGUF loading, i.e. its dequantized weights); writes the arrays to the request's .npz (no
pickle) and prints one JSON line: {"notes": [...]} or {"error": "one sentence"}. (llama.cpp runs
in a process of its own: io/llama_cpp_worker.py.)

Nothing from the model's files is executed (trust_remote_code is never set)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

# run as a script, its own folder (transformer_stepper/io) comes first on sys.path, where the
# package's io/gguf/ would stand in for the gguf library transformers imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def _where(path: Path) -> tuple[Path, dict]:
    """The folder from_pretrained reads and its extra arguments, or ValueError in one line."""
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path.parent, {"gguf_file": path.name}
    folder = path if path.is_dir() else path.parent
    if (folder / "config.json").is_file():
        return folder, {}
    raise ValueError(f"{path}: transformers reads a model folder with config.json or a .gguf file, "
                     f"and this is neither")


def run_hf(request: dict) -> dict:
    import numpy as np
    import torch
    import transformers

    folder, extra = _where(Path(request["model"]))
    cls = {"causal-lm": transformers.AutoModelForCausalLM, "masked-lm": transformers.AutoModelForMaskedLM,
           "base": transformers.AutoModel}[request["kind"]]
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager", **extra)
    except TypeError:            # transformers before `dtype`
        model = cls.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager", **extra)
    model = model.eval()
    ids = torch.tensor([request["input_ids"]], dtype=torch.long)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    import inspect
    if request.get("token_type_ids") is not None and "token_type_ids" in inspect.signature(model.forward).parameters:
        inputs["token_type_ids"] = torch.tensor([request["token_type_ids"]], dtype=torch.long)
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True, output_attentions=True)
    arrays = {"hidden_states": torch.stack(out.hidden_states)[:, 0].numpy().astype(np.float32)}
    if getattr(out, "attentions", None) is not None and all(a is not None for a in out.attentions):
        arrays["attentions"] = torch.stack(out.attentions)[:, 0].numpy().astype(np.float32)
    if getattr(out, "logits", None) is not None:
        arrays["logits"] = out.logits[0].numpy().astype(np.float32)
    return arrays


def main(argv: list[str]) -> int:
    import numpy as np

    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    notes: list[str] = []
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        print(json.dumps({"error": "the check against Hugging Face needs torch and transformers, which "
                                   f"cannot be imported here ({_sentence(exc)}): pip install "
                                   "'transformer-stepper[reference]'"}))
        return 0
    try:
        arrays = run_hf(request)
    except Exception as exc:   # a model transformers cannot read: said, not raised
        print(json.dumps({"error": f"transformers cannot run {request['model']}: {_sentence(exc)}"}))
        return 0
    with open(request["out"], "wb") as handle:
        np.savez(handle, **arrays)
    print(json.dumps({"notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
