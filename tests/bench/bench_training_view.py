"""The Training tab on the quick recipe, offscreen: wall time, frames of the live plots per
second, GUI time per frame, training throughput and what the model reached. Compare the
throughput with the headless run (no plots):

    python tests/bench/bench_training_view.py [--recipe quick|builtin] [--seed 0]
    time transformer-stepper train --recipe quick --out /tmp/quick-model
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name  # noqa: E402

from transformer_stepper.ui.app import application, create_main_window  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="quick")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    app = application()
    window = create_main_window()
    window.resize(1600, 1000)
    window.show()
    view = window.tabs.show_tab("training")
    view.recipe_box.setCurrentIndex(list(view.recipes).index(args.recipe))
    view.seed_box.setValue(args.seed)
    start = time.perf_counter()

    def ended(how: str) -> None:
        wall = time.perf_counter() - start
        print(f"CPU: {cpu_name()}; recipe {args.recipe}, seed {args.seed}: {how}")
        print(f"wall {wall:.1f} s; {view.frames_drawn} frames, {view.frames_drawn / wall:.1f} per "
              f"second, {1000 * view.draw_seconds / max(view.frames_drawn, 1):.0f} ms of GUI time each")
        trained = view.outcome.trained if view.outcome is not None else None
        if trained is not None:
            result = trained.result
            print(f"training {result['tokens_per_second']:,.0f} tokens/s; held-out accuracy "
                  f"{result.get('heldout_accuracy')}")
        app.quit()

    view.runEnded.connect(ended)
    view.start()
    app.exec()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
