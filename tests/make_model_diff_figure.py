"""The figure of docs/model-diff.md: where a Q4_K_M file drifts from its F16 twin, layer by
layer and stage by stage.

    python tests/make_model_diff_figure.py [--layers 8] [--out docs/images]

Writes one random Llama (d_model 256, 4 heads, 2 K/V heads: tests/make_gguf_fixtures.py's
writer and its Q4_K / Q6_K packers, as llama-quantize mixes them for Q4_K_M) as F16 and Q4_K_M
GGUFs in a temporary folder, runs `transformer-stepper diff --model Q4_K_M --against F16 --text
TEXT --json`, and renders the Two Models tab's drift map and per-token lines offscreen
(model-diff-q4km-map.png, model-diff-q4km-tokens.png) beside model-diff-q4km.json.
Needs torch + transformers (the fixture script builds the weights with them)."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "reference"))
TEXT = "She went to the bank to deposit money, then walked along the river bank."


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "images")
    args = parser.parse_args(argv)
    import model_diff_helpers
    from transformer_stepper import load_model
    from transformer_stepper.cli import main as cli
    from transformer_stepper.core.analysis import model_diff
    from transformer_stepper.core.analysis.labels import token_labels

    with tempfile.TemporaryDirectory() as folder:
        paths = model_diff_helpers.write_triplet(Path(folder), args.layers, ("F16", "Q4_K_M"))
        command = ["diff", "--model", str(paths["Q4_K_M"]), "--against", str(paths["F16"]), "--text", TEXT,
                   "--json", str(args.out / "model-diff-q4km.json")]
        print("transformer-stepper " + " ".join(command))
        if cli(command) != 0:
            return 1
        model_a, model_b = load_model(paths["Q4_K_M"]), load_model(paths["F16"])
        trace_a = model_a.trace(TEXT)
        diff = model_diff.diff_traces(trace_a, model_b.trace(TEXT), names=("Q4_K_M", "F16"))
        labels = token_labels(trace_a, model_a.tokenizer)
    from transformer_stepper.ui.offscreen import ensure_application

    ensure_application()
    from transformer_stepper.ui.export.render import ExportOptions, png_bytes, render_png
    from transformer_stepper.ui.model_diff.figures import DriftMap, TokenDrift

    drift_map, tokens = DriftMap(), TokenDrift()
    drift_map.show_diff(diff)
    drift_map.set_title(f"Q4_K_M against F16, {args.layers}-layer Llama: ‖A − B‖ / ‖B‖ per layer and stage")
    tokens.show_diff(diff, labels, len(labels) - 1)
    for figure, name, size in ((drift_map, "model-diff-q4km-map.png", (760, 520)),
                               (tokens, "model-diff-q4km-tokens.png", (760, 460))):
        image = render_png(figure.figure, ExportOptions(size=size))
        (args.out / name).write_bytes(png_bytes(image))
        print(f"wrote {args.out / name}")
        figure.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
