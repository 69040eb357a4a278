"""`transformer-stepper train --recipe translator --out DIR [--steps N] [--seed S]`: train the
built-in translator (core/training/translator.py) and write it as a Marian model folder with its
recipe and measures (held-out exact match, cross-attention alignment per head).
resources/translator/ is this command's output with the default recipe."""
from __future__ import annotations

import json
import time
from pathlib import Path

from ..core.training import translation_corpus as corpus
from ..core.training.translator import TranslatorRecipe, evaluate, train_translator
from ..io.loader import load_model
from ..io.model_folder import check_output, staged_folder
from ..io.translator_folder import config_from_recipe, positions, save_translator


def build(recipe: TranslatorRecipe, out: Path, printer=print) -> dict:
    tokenizer = corpus.build_tokenizer()
    hf = recipe.hf_config(tokenizer.get_vocab_size())
    config = config_from_recipe(hf)
    train_pairs = corpus.generate(recipe.n_train, recipe.seed)
    heldout = [p for p in corpus.generate(recipe.n_heldout * 2, recipe.heldout_seed)
               if p.source_text not in {t.source_text for t in train_pairs}][:recipe.n_heldout]
    every = max(1, recipe.steps // 20)
    started = time.perf_counter()

    def report(step: int, loss: float) -> None:
        if step == 1 or step % every == 0 or step == recipe.steps:
            printer(f"step {step:>5}/{recipe.steps}  loss {loss:.4f}  {time.perf_counter() - started:,.0f} s")

    params = train_translator(recipe, config, positions(config), corpus.encode_pairs(tokenizer, train_pairs), report)
    seconds = round(time.perf_counter() - started, 1)
    with staged_folder(out) as tmp:
        save_translator(tmp, hf, config, params, tokenizer, {"recipe": recipe.to_dict()})
        result = evaluate(load_model(str(tmp)), heldout)      # measured through the app's loader
        result["train_seconds"] = seconds
        (tmp / "recipe.json").write_text(json.dumps({
            "recipe": recipe.to_dict(), "result": result,
            "command": f"transformer-stepper train --recipe translator --out DIR "
                       f"--steps {recipe.steps} --seed {recipe.seed}"}, indent=2) + "\n", encoding="utf-8")
    return result


def run_translator(args) -> int:
    recipe = TranslatorRecipe()
    if args.steps is not None:
        recipe = recipe.replace(steps=int(args.steps))
    if args.seed is not None:
        recipe = recipe.replace(seed=int(args.seed))
    out = Path(args.out).expanduser().absolute()
    check_output(out, bool(getattr(args, "force", False)))
    result = build(recipe, out)
    print(f"held-out exact match {result['exact_match']:.3f} over {result['heldout_pairs']} pairs; "
          f"best cross-attention head (layer, head) {tuple(result['best_head'])} puts "
          f"{result['best_alignment_share']:.3f} of its mass on the aligned source word")
    print(f"wrote {out}")
    return 0
