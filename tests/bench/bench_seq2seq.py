"""One encoder–decoder decoding step with the caches (the decoder's self-attention keys and
values, and the memory's cross-attention k, v computed once per source) against re-running the
decoder over the whole prefix (and projecting the memory again), on a random model shaped like
Helsinki-NLP/opus-mt-en-de (Marian base: d_model 512, 6 + 6 layers, 8 heads, d_ff 2048,
58101-token shared vocabulary, sinusoidal positions) at 128 source tokens.

    python tests/bench/bench_seq2seq.py [--source 128] [--prefix 8 32 96] [--repeat 5]

Prints the median of --repeat runs. Both paths compute the same logits (checked)."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.core.model.kv_cache import KVCache
from transformer_stepper.core.model.seq2seq import (
    Seq2SeqConfig,
    cross_context,
    cross_kv,
    decode,
    encode,
    encoder_context,
    expected_seq2seq_shapes)
from transformer_stepper.runtime import tune_process


def marian_base() -> tuple[Seq2SeqConfig, dict]:
    stack = dict(family="marian", n_vocab=58101, n_ctx=512, d_model=512, n_head=8, n_layer=6,
                 d_ff=2048, position="sinusoidal", norm="post", activation="silu",
                 embed_scale=512 ** 0.5)
    config = Seq2SeqConfig(encoder=ModelConfig(**stack),
                           decoder=ModelConfig(**stack, causal=True, lm_head=True),
                           decoder_start_token_id=58100, eos_token_id=0, pad_token_id=58100,
                           logits_bias=True, family="marian")
    rng = np.random.default_rng(0)
    params = {name: (rng.standard_normal(shape, dtype=np.float32) * 0.05)
              for name, shape in expected_seq2seq_shapes(config).items()}
    for name in params:
        if name.endswith(".g"):
            params[name] += 1
    return config, params


def median_ms(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=int, default=128)
    parser.add_argument("--prefix", type=int, nargs="+", default=[8, 32, 96])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tune_process()
    config, params = marian_base()
    rng = np.random.default_rng(1)
    source = rng.integers(1, 58000, args.source)
    memory = encode(params, config, source, encoder_context(params, config, len(source)))
    memory_kv, cross = cross_kv(params, config, memory), cross_context(config)
    print(f"Marian-base-shaped random model, {args.source} source tokens, median of {args.repeat}")
    print(f"encoder (once per source): {median_ms(lambda: encode(params, config, source, encoder_context(params, config, len(source))), args.repeat):.1f} ms")
    for n in args.prefix:
        target = rng.integers(1, 58000, n + 1)

        def cached_step():
            cache = KVCache(config.decoder.n_layer)
            decode(params, config, target[:n], memory_kv, cross, cache=cache, logits=False)
            start = time.perf_counter()
            out = decode(params, config, target[n:], memory_kv, cross, cache=cache)
            cached_step.ms = (time.perf_counter() - start) * 1e3
            return out["logits"][-1]

        def rerun():
            return decode(params, config, target, cross_kv(params, config, memory), cross)["logits"][-1]

        step_times = []
        for _ in range(args.repeat):
            last = cached_step()
            step_times.append(cached_step.ms)
        step_ms = statistics.median(step_times)
        rerun_ms = median_ms(rerun, args.repeat)
        assert np.allclose(last, rerun(), atol=1e-3), "cached and re-run logits differ"
        print(f"prefix {n:3d}: cached step {step_ms:6.1f} ms, re-running the prefix {rerun_ms:7.1f} ms "
              f"({rerun_ms / step_ms:.1f}x)")


if __name__ == "__main__":
    main()
