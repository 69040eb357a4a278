"""`transformer-stepper diff --model A --against B --text TEXT [--json OUT] [--weights]`: where
model A's forward pass drifts from model B's on one text (core/analysis/model_diff.py; B is the
reference of every ratio): a per-layer table, and with --json the document

    {"tokens": [ids], "embedding": {"hidden_rel": x, "hidden_cos": c},
     "layers": [{"layer": i, "hidden_rel": x, "hidden_cos": c, "attn_rel": x, "mlp_rel": x}, ...],
     "output": {"kl": k, "top1_agree": f}}

layers[i] compares block i's output as Hugging Face's hidden_states[i + 1] (the last one after
the final norm); "output" is null for a model without an output head. --weights adds each
tensor's own error ‖W_A − W_B‖ / ‖W_B‖ (reads every weight of both models). Two models whose
tokenizers give different ids, or whose tensors differ in shape, are refused in one line."""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..core.model.errors import ModelError
from .console import say


def add_parser(sub) -> None:
    parser = sub.add_parser("diff", help="where model A drifts from model B on one text, layer by "
                                         "layer (F16 against Q4_K_M, base against fine-tuned)")
    parser.add_argument("--model", required=True, help="model A: HF folder, .safetensors, .gguf or .npz")
    parser.add_argument("--against", required=True, help="model B, the reference")
    parser.add_argument("--text", required=True)
    parser.add_argument("--json", help="write the figures to this .json file")
    parser.add_argument("--weights", action="store_true", help="also each tensor's own error")
    parser.set_defaults(run=run_diff)


def load_pair(path_a: str, path_b: str):
    """Both models, refused in one line when they cannot be compared (before any pass)."""
    from ..core.analysis import model_diff
    from ..io.loader import load_model

    models = []
    for path in (path_a, path_b):
        model = load_model(path)
        if getattr(model, "is_seq2seq", False):
            raise ModelError(f"{path}: an encoder–decoder model; diff compares encoders and decoders")
        for warning in model.warnings:
            say(f"warning: {path}: {warning}", sys.stderr)
        models.append(model)
    model_diff.check_same_shape(models[0].config, models[1].config, (path_a, path_b))
    return models


def traced_pair(model_a, model_b, text: str, names):
    """Both traces of `text`, refused first when the tokenizers' ids differ."""
    from ..core.analysis import model_diff

    encoded_a, encoded_b = model_a.encode(text), model_b.encode(text)
    model_diff.check_same_tokens(encoded_a.input_ids, encoded_a.tokens, encoded_b.input_ids,
                                 encoded_b.tokens, names)
    return model_a.trace_encoded(encoded_a, text), model_b.trace_encoded(encoded_b, text)


def _number(x) -> str:
    return "" if x is None else f"{x:.6g}"


def table(diff) -> list[str]:
    rows = [f"{'':12}{'hidden_rel':>12}{'hidden_cos':>12}{'attn_rel':>12}{'mlp_rel':>12}",
            f"{'embedding':12}{diff.embedding.relative:12.6g}{diff.embedding.cosine:12.8f}"]
    for entry in diff.to_json()["layers"]:
        rows.append(f"{'layer ' + str(entry['layer']):12}{entry['hidden_rel']:12.6g}{entry['hidden_cos']:12.8f}"
                    f"{_number(entry['attn_rel']):>12}{_number(entry['mlp_rel']):>12}")
    largest = diff.largest_addition()
    if largest is not None:
        rows.append(f"most drift added: layer {largest[0]}'s {largest[1]} (relative drift +{largest[2]:.4g})")
    elif diff.layers:
        rows.append("no sub-block adds drift: the residual stream's relative drift never rises")
    if diff.output is not None:
        rows.append(f"output: KL(p_B || p_A) {diff.output.kl:.6g} nats (mean over {len(diff.output.kl_at)} "
                    f"positions), top-1 agreement {100 * diff.output.top1_agree:.1f} %")
    return rows


def _plain(value):
    """JSON has no inf or NaN: such a figure (B's array all zeros) is written as null."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def run_diff(args: argparse.Namespace) -> int:
    from ..core.analysis import model_diff
    from ..io.array_export import write_bytes

    out = Path(args.json) if args.json else None
    if out is not None and out.suffix.lower() != ".json":
        raise ModelError(f"{out}: the output file must end in .json")
    if out is not None and not out.parent.is_dir():
        raise ModelError(f"{out.parent}: folder does not exist")
    if not args.text.strip():
        raise ModelError("--text: give a text to run through both models")
    names = (args.model, args.against)
    model_a, model_b = load_pair(*names)
    trace_a, trace_b = traced_pair(model_a, model_b, args.text, names)
    diff = model_diff.diff_traces(trace_a, trace_b, names=names)
    say(f"A: {args.model}\nB: {args.against} (the reference)\n{trace_a.n_seq} tokens"
        + (" (the text was truncated to the context)" if trace_a.truncated else ""))
    for row in table(diff):
        say(row)
    document = diff.to_json()
    if args.weights:
        errors = dict(model_diff.weight_errors(model_a.params, model_b.params, list(model_a.params)))
        say("weights (‖W_A − W_B‖ / ‖W_B‖), largest first:")
        for name, value in sorted(errors.items(), key=lambda kv: -kv[1]):
            say(f"  {name:28}{value:.6g}")
        document["weights"] = errors
    if out is not None:
        text = json.dumps(_plain(document), indent=1, allow_nan=False) + "\n"
        replaced = write_bytes(out, text.encode("utf-8"))
        say(f"wrote {out}" + (" (replaced the existing file)" if replaced else ""))
    return 0
