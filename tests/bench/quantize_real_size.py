"""llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize, llama-quantize's code) turns
an F16 file written by tests/bench/make_real_size.py into the schemes people download:

    python tests/bench/make_real_size.py OUT_DIR --scheme F16 [--shape qwen3_8b]
    python tests/bench/quantize_real_size.py OUT_DIR/llama8b_f16.gguf --scheme Q8_0 Q6_K Q5_K_M
        [--requantize-from Q8_0] [--delete-source]

Each output is OUT_DIR/<shape>_<scheme>.gguf beside the source. The tensor types are
llama-quantize's (llama_tensor_get_type, no importance matrix). With --requantize-from, every
scheme after that one is quantized from that scheme's file rather than from the source (llama.cpp
dequantizes it to float32 first): the weights are then the F16 weights rounded twice — an 8B F16
is 16 GB, and with it deleted early three quantized files fit a smaller disk. Much faster than the
project's Python packers (make_real_size.py): minutes rather than half an hour a file."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

FTYPES = {"Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q8_0": 7, "Q4_0": 2}        # llama_ftype


def quantize(source: Path, target: Path, scheme: str, threads: int = 2) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[scheme]
    params.nthread = threads
    params.allow_requantize = True
    partial = target.with_suffix(".partial")
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), params)
    if status != 0:
        partial.unlink(missing_ok=True)
        raise SystemExit(f"{source}: llama_model_quantize to {scheme} failed (status {status})")
    partial.rename(target)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--scheme", choices=tuple(FTYPES), nargs="+", required=True)
    parser.add_argument("--requantize-from", choices=tuple(FTYPES))
    parser.add_argument("--delete-source", action="store_true",
                        help="delete the source once no scheme needs it any more")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    stem = args.source.stem.rsplit("_", 1)[0]
    source = args.source
    for scheme in args.scheme:
        target = args.source.with_name(f"{stem}_{scheme.lower()}.gguf")
        if target.exists():
            print(f"{target} exists; kept")
        else:
            start = time.perf_counter()
            quantize(source, target, scheme, args.threads)
            print(f"{target} from {source.name}: {target.stat().st_size / 1e9:.2f} GB in "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
        if scheme == args.requantize_from:
            if args.delete_source and source == args.source:
                args.source.unlink()
                print(f"{args.source} deleted")
            source = target
    if args.delete_source and args.source.exists():
        args.source.unlink()
        print(f"{args.source} deleted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
