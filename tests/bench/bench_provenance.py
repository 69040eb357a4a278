"""How long explaining one clicked value takes (core.analysis.provenance.explain.explain, slowest and median
over random cells of every explainable array), a traced pass with interventions against
the clean pass, and the Interventions tab's work per change (the intervened pass with every
layer recorded, plus the differences at every stage: core.analysis.differences.intervene_and_compare)
against a clean traced pass. The traces are made first, with the detail of every layer: what
the app has when a view is on screen.

    python tests/bench/bench_provenance.py [MODEL] [--tokens 64] [--cells 5]

MODEL: a folder or file, or builtin (the default)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name, encoded, token_ids, traced  # noqa: E402

from transformer_stepper import AblateHead, NoPositions, load_model  # noqa: E402
from transformer_stepper.core.analysis.differences import intervene_and_compare, stage_differences  # noqa: E402
from transformer_stepper.core.analysis.provenance.explain import explain, explainable  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402


def median_ms(function, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="builtin")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--cells", type=int, default=5)
    args = parser.parse_args()
    tune_process()
    model = load_model(None if args.model == "builtin" else args.model)
    ids = token_ids(model, min(args.tokens, model.config.n_ctx))
    trace = traced(model, ids, tuple(range(model.config.n_layer)))
    rng = np.random.default_rng(0)
    times = {}
    for name in explainable(trace):
        shape = trace[name].shape
        for _ in range(args.cells):
            index = tuple(int(rng.integers(n)) for n in shape)
            start = time.perf_counter()
            explain(model, trace, name, index)
            times.setdefault(name, []).append(1000 * (time.perf_counter() - start))
    every = [t for values in times.values() for t in values]
    slowest = max(times, key=lambda name: max(times[name]))
    print(f"CPU: {cpu_name()}; {model.name}, {trace.n_seq} tokens")
    print(f"explain one value: median {statistics.median(every):.2f} ms, slowest "
          f"{max(every):.2f} ms ({slowest}) over {len(every)} cells of {len(times)} arrays")
    # interleaved, so both sides see the same machine load
    clean, ablated = [], []
    for _ in range(15):
        clean.append(median_ms(lambda: model.trace_encoded(encoded(ids)), 1))
        ablated.append(median_ms(lambda: model.trace_encoded(
            encoded(ids), interventions=[AblateHead(0, 0), NoPositions()]), 1))
    clean_ms, ablated_ms = statistics.median(clean), statistics.median(ablated)
    print(f"traced pass (median of 15, interleaved): clean {clean_ms:.1f} ms, with "
          f"AblateHead(0, 0) and NoPositions() {ablated_ms:.1f} ms ({ablated_ms / clean_ms:.2f}x)")
    intervention_figures(model, ids)
    return 0


def intervention_figures(model, ids) -> None:
    """warm: the clean trace's layers are computed already (the user ticks another head); an
    ablation in layer 0 re-runs every layer, one in the middle only the layers from there on;
    cold: a new text, so the clean trace's detail is computed too (once per text)."""
    clean_trace = model.trace_encoded(encoded(ids))
    for layer in range(model.config.n_layer):
        clean_trace.detail(layer)
    for chosen in ([AblateHead(0, 0)], [AblateHead(model.config.n_layer // 2, 0)]):
        intervened, _ = intervene_and_compare(model, clean_trace, chosen)
        clean, warm, differences = [], [], []
        for _ in range(15):
            clean.append(median_ms(lambda: model.trace_encoded(encoded(ids)), 1))
            warm.append(median_ms(lambda: intervene_and_compare(model, clean_trace, chosen), 1))
            differences.append(median_ms(lambda: stage_differences(clean_trace, intervened), 1))
        clean_ms, warm_ms = statistics.median(clean), statistics.median(warm)
        print(f"intervened pass + differences at every stage, {chosen[0]} (median of 15, interleaved): "
              f"clean traced pass {clean_ms:.1f} ms; intervened + differences {warm_ms:.1f} ms "
              f"({warm_ms / clean_ms:.2f}x), of which the differences {statistics.median(differences):.1f} ms")
    clean, cold = [], []
    for _ in range(7):
        clean.append(median_ms(lambda: model.trace_encoded(encoded(ids)), 1))
        cold.append(median_ms(lambda: intervene_and_compare(
            model, model.trace_encoded(encoded(ids)), [AblateHead(0, 0)]), 1))
    clean_ms, cold_ms = statistics.median(clean), statistics.median(cold)
    print(f"a new text (the clean pass, its every layer's detail, the intervened pass, the differences; "
          f"median of 7): {cold_ms:.1f} ms ({cold_ms / clean_ms:.2f}x the clean traced pass {clean_ms:.1f} ms)")



if __name__ == "__main__":
    sys.exit(main())
