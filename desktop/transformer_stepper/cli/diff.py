"""`transformer-stepper diff --model A --against B --text TEXT [--json OUT] [--weights]`: where
model A's forward pass drifts from model B's on one text (core/analysis/model_diff.py; B is the
reference of every ratio): a per-layer table, and with --json the document

    {"tokens": [ids], "embedding": {"hidden_rel": x, "hidden_cos": c},
     "layers": [{"layer": i, "hidden_rel": x, "hidden_cos": c, "attn_rel": x, "mlp_rel": x}, ...],
     "output": {"kl": k, "top1_agree": f}}

layers[i] compares block i's output as Hugging Face's hidden_states[i + 1] (the last one after
the final norm); "output" is null for a model without an output head. --weights adds each
tensor's own error ‖W_A − W_B‖ / ‖W_B‖ (reads every weight of both models). Two models whose
tokenizers give different ids, or whose tensors differ in shape, are refused in one line.

Two encoder–decoders (T5, BART, Marian; core/analysis/seq2seq_diff.py): --text is the source,
--target the decoder's text (default: B's greedy translation of the source); the document has
"tokens" (the source's), "decoder_tokens", "embedding" and "encoder_layers" for the encoder,
"decoder_embedding" and "decoder_layers" (each with "cross_rel", the cross-attention output's
drift) for the decoder, and "output" over the target positions."""
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
    parser.add_argument("--target", help="encoder–decoders: the decoder's text (default: B's greedy "
                                         "translation of --text)")
    parser.set_defaults(run=run_diff)


def load_pair(path_a: str, path_b: str):
    """Both models, refused in one line when they cannot be compared (before any pass)."""
    from ..core.analysis import model_diff
    from ..io.loader import load_model

    from ..core.analysis import seq2seq_diff

    models = []
    for path in (path_a, path_b):
        model = load_model(path)
        for warning in model.warnings:
            say(f"warning: {path}: {warning}", sys.stderr)
        models.append(model)
    kinds = [bool(getattr(model, "is_seq2seq", False)) for model in models]
    if kinds[0] != kinds[1]:
        one, other = (path_a, path_b) if kinds[0] else (path_b, path_a)
        raise ModelError(f"{one} is an encoder–decoder and {other} is not: the architectures differ")
    if kinds[0]:
        seq2seq_diff.check_same_seq2seq_shape(models[0].config, models[1].config, (path_a, path_b))
    else:
        model_diff.check_same_shape(models[0].config, models[1].config, (path_a, path_b))
    return models


def traced_pair(model_a, model_b, text: str, names):
    """Both traces of `text`, refused first when the tokenizers' ids differ."""
    from ..core.analysis import model_diff

    encoded_a, encoded_b = model_a.encode(text), model_b.encode(text)
    model_diff.check_same_tokens(encoded_a.input_ids, encoded_a.tokens, encoded_b.input_ids,
                                 encoded_b.tokens, names)
    return model_a.trace_encoded(encoded_a, text), model_b.trace_encoded(encoded_b, text)


def traced_seq2seq_pair(model_a, model_b, source: str, target, names):
    """Both encoder–decoders on the source and target (None: B's greedy translation), refused
    first when the source's or the target's ids differ."""
    from ..core.analysis import model_diff
    from ..core.trace.seq2seq_generate import generate

    encoded_a, _ = model_a.encode_source(source)
    encoded_b, _ = model_b.encode_source(source)
    model_diff.check_same_tokens(encoded_a.input_ids, encoded_a.tokens, encoded_b.input_ids,
                                 encoded_b.tokens, names)
    if target is None:
        start = model_b.trace(source)
        steps = generate(model_b, start, min(32, model_b.config.decoder.n_ctx - 1))
        ids_b = (steps[-1] if steps else start).decoder.input_ids[1:]
        ids_a = ids_b
    else:
        (ids_a, _), (ids_b, _) = model_a.encode_target(target), model_b.encode_target(target)
        pieces = [str(i) for i in ids_a], [str(i) for i in ids_b]
        model_diff.check_same_tokens(ids_a, pieces[0], ids_b, pieces[1], names)
    return model_a.trace(source, target_ids=ids_a), model_b.trace(source, target_ids=ids_b)


def seq2seq_table(diff) -> list[str]:
    rows = []
    for stack, part in (("encoder", diff.encoder), ("decoder", diff.decoder)):
        rows.append(f"{stack}:")
        rows += table(part, cross=stack == "decoder", summary=False)
    largest = diff.largest_addition()
    rows.append(f"most drift added: the {largest[0]}'s layer {largest[1]} {largest[2]} (relative drift "
                f"+{largest[3]:.4g})" if largest is not None else
                "no sub-block adds drift: the residual stream's relative drift never rises")
    output = diff.decoder.output
    if output is not None:
        rows.append(f"output: KL(p_B || p_A) {output.kl:.6g} nats (mean over {len(output.kl_at)} "
                    f"target positions), top-1 agreement {100 * output.top1_agree:.1f} %")
    return rows


def _number(x) -> str:
    return "" if x is None else f"{x:.6g}"


def table(diff, cross: bool = False, summary: bool = True) -> list[str]:
    """cross: a decoder's layers, with the cross-attention output's drift; summary: the lines
    naming where most drift enters and the output's figures."""
    rows = [f"{'':12}{'hidden_rel':>12}{'hidden_cos':>12}{'attn_rel':>12}"
            + (f"{'cross_rel':>12}" if cross else "") + f"{'mlp_rel':>12}",
            f"{'embedding':12}{diff.embedding.relative:12.6g}{diff.embedding.cosine:12.8f}"]
    for entry in diff.to_json()["layers"]:
        stages = diff.layers[entry["layer"]].stages if entry["layer"] < len(diff.layers) else {}
        crossed = (f"{_number(stages['cross_attn_out'].relative if 'cross_attn_out' in stages else None):>12}"
                   if cross else "")
        rows.append(f"{'layer ' + str(entry['layer']):12}{entry['hidden_rel']:12.6g}{entry['hidden_cos']:12.8f}"
                    f"{_number(entry['attn_rel']):>12}{crossed}{_number(entry['mlp_rel']):>12}")
    if not summary:
        return rows
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

    out = Path(args.json) if args.json else None
    if out is not None and out.suffix.lower() != ".json":
        raise ModelError(f"{out}: the output file must end in .json")
    if out is not None and not out.parent.is_dir():
        raise ModelError(f"{out.parent}: folder does not exist")
    if not args.text.strip():
        raise ModelError("--text: give a text to run through both models")
    names = (args.model, args.against)
    model_a, model_b = load_pair(*names)
    if getattr(model_a, "is_seq2seq", False):
        document = _seq2seq_document(model_a, model_b, args, names)
    else:
        if args.target is not None:
            raise ModelError("--target: only for encoder–decoders (T5, BART, Marian)")
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
    _write(out, document)
    return 0


def _seq2seq_document(model_a, model_b, args, names) -> dict:
    from ..core.analysis import seq2seq_diff

    trace_a, trace_b = traced_seq2seq_pair(model_a, model_b, args.text, args.target, names)
    diff = seq2seq_diff.diff_seq2seq(trace_a, trace_b, names=names)
    target = ("the target given" if args.target is not None else "B's greedy translation as the target")
    say(f"A: {args.model}\nB: {args.against} (the reference)\n{trace_a.encoder.n_seq} source tokens, "
        f"{trace_a.decoder.n_seq} decoder positions ({target})")
    for row in seq2seq_table(diff):
        say(row)
    return diff.to_json()


def _write(out, document: dict) -> None:
    from ..io.array_export import write_bytes

    if out is not None:
        text = json.dumps(_plain(document), indent=1, allow_nan=False) + "\n"
        replaced = write_bytes(out, text.encode("utf-8"))
        say(f"wrote {out}" + (" (replaced the existing file)" if replaced else ""))
