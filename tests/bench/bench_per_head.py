"""A layer over the detail budget kept per head, on a big model at a long text:

    python tests/bench/bench_per_head.py MODEL_DIR TOKENS      (e.g. llama_1b_shaped 4096)

Prints the pass's time and what the cache keeps (layer 5 recorded, as the app does), the time
of two heads' scores and weights, of computing layer 6, and the peak anonymous memory."""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_big import cpu_name, encoded, token_ids  # noqa: E402
from memory import peak_rss_anon  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402

tune_process()
m = load_model(sys.argv[1]); n = int(sys.argv[2])
ids = token_ids(m, n)
with peak_rss_anon() as peak:
    s = time.perf_counter()
    t = m.trace_encoded(encoded(ids), detail_layers=(5,))
    first = time.perf_counter() - s
    c = t.cache
    print(f"{cpu_name()}; {m.name} {n} tokens: pass {first:.1f} s; cache {c.nbytes()/2**20:.0f} MiB of {c.budget/2**20:.0f}, layers {c.layers()}, per head {c.per_head()}, oversized {c.oversized()}", flush=True)
    for name in ("scores", "attn_weights"):
        for h in (0, 1):
            s = time.perf_counter(); t.head_array(name, 5, h); el = time.perf_counter() - s
            print(f"  head {h} {name}: {el*1e3:.0f} ms; cache {c.nbytes()/2**20:.0f} MiB", flush=True)
    s = time.perf_counter(); t.prepare(6); el = time.perf_counter() - s
    print(f"  layer 6 computed: {el:.1f} s; cache {c.nbytes()/2**20:.0f} MiB, layers {c.layers()}, per head {c.per_head()}", flush=True)
print(f"  peak RssAnon {peak()/2**20:.0f} MiB")
