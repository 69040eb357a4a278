"""The Training tab: pick a recipe and a seed, press Train, and watch E learn — the loss, E's
rows on a stable 2-D map by word class, nearest neighbours, which rows the last step's
gradient touched, the class separation. After the run, a slider scrubs the snapshots; one
opens in the stepper, and the model saves as a folder with history.npz."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QGridLayout, QHBoxLayout, QHeaderView,
                               QLabel, QLineEdit, QProgressBar, QPushButton, QSlider, QSpinBox,
                               QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ...core.model.errors import ModelError
from ...core.training import corpus
from ...core.training.recipe import RECIPES, TrainedModel
from ...core.training.watch import StableMap, nearest_words
from ...io.model_folder import save_model_folder, write_model_folder
from ..explain import explanations
from ..export.menu import install_plot_menu, warn
from ..explain.explanation_panel import ExplanationPanel
from ..reflow import ElidingLabel
from ..timers import one_shot
from ..workers import WorkerPool
from .figures import EmbeddingMap, GradientStrip, LossFigure, SeparationFigure
from .worker import Frame, Outcome, TrainingWorker

DEFAULT_WORDS = ("queen", "bank", "she", "river")
N_NEIGHBOURS = 5
RECIPE_TITLES = {"quick": "quick (2 layers, d 48, 1000 steps: about 45 s)",
                 "builtin": "built-in (3 layers, d 64, 3000 steps: about 4 min)"}
QUICK_NOTE = ("1,000 steps on shorter passages; 68 % held-out next-token accuracy and a "
              "pronoun → antecedent head (layer 1, head 1) in about 45 s")


class TrainingView(QWidget):
    frameShown = Signal(int)             # a frame of this step is on screen
    runEnded = Signal(str)               # "finished", "stopped" or "failed"

    def __init__(self, settings: Optional[QSettings] = None,
                 open_in_stepper: Optional[Callable[[str], None]] = None,
                 recipes: Optional[dict] = None, parent: Optional[QWidget] = None,
                 workers: Optional[WorkerPool] = None) -> None:
        """`workers`: the pool the run is a job on (the window's, beside tracing); else its own."""
        super().__init__(parent)
        self.workers = workers if workers is not None else WorkerPool(max_threads=1)
        self.settings = settings
        self.open_in_stepper = open_in_stepper
        self.recipes = dict(recipes or RECIPES)
        self.worker: Optional[TrainingWorker] = None
        self.outcome: Optional[Outcome] = None
        self.last_frame: Optional[Frame] = None
        self.map = StableMap()
        self.tokenizer = corpus.build_tokenizer()
        self.words = [self.tokenizer.id_to_token(i)
                      for i in range(self.tokenizer.get_vocab_size(with_added_tokens=True))]
        self.classes = corpus.vocabulary_classes(self.tokenizer)
        self.special_ids = [i for i, c in enumerate(self.classes) if c == "special"]
        self.frames_drawn = 0
        self.draw_seconds = 0.0
        self._pending: Optional[Frame] = None
        self._started = 0.0
        self._temporary = tempfile.TemporaryDirectory(prefix="transformer-stepper-snapshots-")
        self._draw_timer = one_shot(self, 0, self._draw_pending)
        self._build()
        self._set_running(False)
        self._explain()

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 2)
        outer.setSpacing(4)
        top = QHBoxLayout()
        top.addWidget(QLabel("Recipe:"))
        self.recipe_box = QComboBox()
        for key in self.recipes:
            self.recipe_box.addItem(RECIPE_TITLES.get(key, key), key)
        top.addWidget(self.recipe_box)
        top.addWidget(QLabel("Seed:"))
        self.seed_box = QSpinBox()
        self.seed_box.setRange(0, 2**31 - 1)
        top.addWidget(self.seed_box)
        self.train_button = QPushButton("Train")
        self.train_button.clicked.connect(self.start)
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self.toggle_pause)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        for button in (self.train_button, self.pause_button, self.stop_button):
            top.addWidget(button)
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m steps")
        self.progress.setMinimumWidth(140)
        top.addWidget(self.progress, stretch=1)
        # what fits of the run's state (whole in its tooltip): a 1280-pixel window holds the row
        self.status = ElidingLabel()
        self.status.setStyleSheet("color: #555;")
        top.addWidget(self.status, stretch=1)
        outer.addLayout(top)

        self.message = QLabel()
        self.message.setStyleSheet("color: #b00020;")
        self.message.setVisible(False)
        outer.addWidget(self.message)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        plots = QWidget()
        grid = QGridLayout(plots)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        self.loss = LossFigure()
        self.embedding = EmbeddingMap()
        self.embedding.set_vocabulary(self.words, self.classes, DEFAULT_WORDS)
        self.lookup_strip = GradientStrip("3. The last step's gradient on E through the lookup "
                                          "(▲ = ids in the batch)", "#d62728", marks=True)
        self.head_strip = GradientStrip("4. …and through the tied output head (every row)",
                                        "#7f7f7f", marks=False)
        self.separation = SeparationFigure()
        grid.addWidget(self.loss, 0, 0)
        grid.addWidget(self.embedding, 0, 1, 2, 1)
        grid.addWidget(self.separation, 1, 0)
        grid.addWidget(self.lookup_strip, 2, 0)
        grid.addWidget(self.head_strip, 2, 1)
        grid.setRowStretch(0, 3)
        grid.setRowStretch(1, 2)
        grid.setRowStretch(2, 2)
        for name, figure in self.figures():
            install_plot_menu(self, name, figure)
            figure.hovered.connect(self._hovered)

        side = QSplitter(Qt.Orientation.Vertical)
        table_box = QWidget()
        table_layout = QVBoxLayout(table_box)
        table_layout.setContentsMargins(0, 0, 0, 0)
        words_row = QHBoxLayout()
        words_row.addWidget(QLabel("Nearest rows of:"))
        self.words_box = QLineEdit(", ".join(DEFAULT_WORDS))
        self.words_box.editingFinished.connect(self._words_changed)
        words_row.addWidget(self.words_box)
        table_layout.addLayout(words_row)
        self.table = QTableWidget(0, N_NEIGHBOURS)
        self.table.setHorizontalHeaderLabels([f"#{i + 1}" for i in range(N_NEIGHBOURS)])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table_layout.addWidget(self.table)
        self.explanation = ExplanationPanel()
        side.addWidget(table_box)
        side.addWidget(self.explanation)
        side.setSizes([200, 500])
        splitter.addWidget(plots)
        splitter.addWidget(side)
        splitter.setStretchFactor(0, 1)
        splitter.setSizes([1050, 360])
        outer.addWidget(splitter, stretch=1)

        bottom = QHBoxLayout()
        bottom.addWidget(QLabel("x axis:"))
        self.axis_box = QComboBox()
        self.axis_box.addItems(["steps", "tokens seen"])
        self.axis_box.currentIndexChanged.connect(lambda i: self.loss.set_axis(i == 1))
        bottom.addWidget(self.axis_box)
        bottom.addSpacing(12)
        bottom.addWidget(QLabel("Snapshot:"))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.valueChanged.connect(self.show_snapshot)
        bottom.addWidget(self.slider, stretch=1)
        self.snapshot_label = QLabel("no run yet")
        self.snapshot_label.setMinimumWidth(160)
        bottom.addWidget(self.snapshot_label)
        self.open_button = QPushButton("Open in Stepper")
        self.open_button.clicked.connect(self.open_snapshot)
        self.save_button = QPushButton("Save Model…")
        self.save_button.clicked.connect(self.ask_save)
        bottom.addWidget(self.open_button)
        bottom.addWidget(self.save_button)
        outer.addLayout(bottom)
        self.readout = QLabel("Hover a plot for exact values.")
        self.readout.setStyleSheet("color: #444;")
        outer.addWidget(self.readout)
        self._fill_table(None)

    def figures(self):
        return [("loss", self.loss), ("embedding_map", self.embedding),
                ("gradient_lookup", self.lookup_strip), ("gradient_head", self.head_strip),
                ("class_separation", self.separation)]

    # -- running ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None

    def start(self) -> None:
        if self.running:
            return
        key = self.recipe_box.currentData()
        self.start_recipe(self.recipes[key].replace(seed=int(self.seed_box.value())))

    def start_short(self, steps: int) -> bool:
        """A guided walk's run: the quick recipe cut to `steps` (every plot drawn in seconds);
        nothing when a run is going or has been made (its plots are there already)."""
        if self.running or self.outcome is not None or "quick" not in self.recipes:
            return False
        self.recipe_box.setCurrentIndex(self.recipe_box.findData("quick"))
        self.start_recipe(self.recipes["quick"].replace(seed=int(self.seed_box.value()), steps=steps))
        return True

    def start_recipe(self, recipe) -> None:
        self.outcome, self.last_frame = None, None
        self.map.reset()
        self.embedding.extent = 0.0
        self.frames_drawn, self.draw_seconds = 0, 0.0
        self._show_message("")
        self.progress.setRange(0, recipe.steps)
        self.progress.setValue(0)
        self.worker = TrainingWorker(recipe, self.workers, parent=self)
        self.worker.preparing.connect(self.status.setText)
        self.worker.frame.connect(self._on_frame)
        self.worker.finished_run.connect(self._on_outcome)
        self.worker.failed.connect(self._on_failed)
        self._started = time.perf_counter()
        self._set_running(True)
        self.worker.start()

    def toggle_pause(self) -> None:
        if not self.running:
            return
        if self.worker.control.paused:
            self.worker.resume()
            self.pause_button.setText("Pause")
        else:
            self.worker.pause()
            self.pause_button.setText("Resume")
            self.status.setText(self.status.text() + " · paused")

    def stop(self) -> None:
        if self.running:
            self.worker.stop()

    def _set_running(self, running: bool) -> None:
        self.train_button.setEnabled(not running)
        self.recipe_box.setEnabled(not running)
        self.seed_box.setEnabled(not running)
        self.pause_button.setEnabled(running)
        self.stop_button.setEnabled(running)
        self.pause_button.setText("Pause")
        done = self.outcome is not None
        self.slider.setEnabled(done and not running)
        self.open_button.setEnabled(done and not running and self.open_in_stepper is not None
                                    and bool(self.outcome.history.models))
        self.save_button.setEnabled(done and not running and self.outcome.trained is not None)

    def _finish_worker(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.wait()
            worker.deleteLater()
        self._set_running(False)

    def _on_frame(self, frame: Frame) -> None:
        self._pending = frame                 # draw only the newest if frames queue up
        if not self._draw_timer.isActive():
            self._draw_timer.start()

    def _draw_pending(self) -> None:
        frame, self._pending = self._pending, None
        if frame is not None:
            self.draw_frame(frame)

    def draw_frame(self, frame: Frame) -> None:
        started = time.perf_counter()
        self.last_frame = frame
        self.progress.setValue(frame.step)
        remaining = (frame.steps - frame.step) * frame.seconds / max(frame.step, 1)
        paused = " · paused" if self.worker is not None and self.worker.control.paused else ""
        self.status.setText(f"{frame.tokens_per_second:,.0f} tokens/s · {frame.seconds:.0f} s · "
                            f"ETA {remaining:.0f} s{paused}")
        self.loss.show(frame)
        coords = self.map.follow(frame.table)
        self.embedding.show(coords, f"2. The embedding table E at step {frame.step}: every row, "
                                    f"2-D PCA (refitted, turned to match the last frame)")
        self.lookup_strip.show(frame.lookup_grad_norms, frame.batch_ids, self.words)
        self.head_strip.show(frame.head_grad_norms, np.zeros(0, dtype=np.int64), self.words)
        self.separation.show(frame.snapshot_steps, frame.separation)
        self._fill_table(frame.table)
        self._explain()
        self.frames_drawn += 1
        self.draw_seconds += time.perf_counter() - started
        self.frameShown.emit(frame.step)

    def _on_outcome(self, outcome: Outcome) -> None:
        self._draw_pending()
        self.outcome = outcome
        ended = "finished" if outcome.trained is not None else "stopped"
        self._finish_worker()
        history = outcome.history
        self.map.fit_reference(history.snapshots[-1])
        self.slider.blockSignals(True)
        self.slider.setRange(0, len(history.snapshots) - 1)
        self.slider.setValue(len(history.snapshots) - 1)
        self.slider.blockSignals(False)
        self.show_snapshot(len(history.snapshots) - 1)
        if outcome.trained is not None:
            result = outcome.trained.result
            self.status.setText(
                f"finished in {result['train_seconds']:.0f} s · held-out accuracy "
                f"{result.get('heldout_accuracy', float('nan')):.1%} (unigram "
                f"{result.get('unigram_accuracy', float('nan')):.1%})"
                + self._head_note(result))
        else:
            self.status.setText(f"stopped at step {history.steps[-1] if history.steps else 0}; "
                                f"nothing was saved")
        self.runEnded.emit(ended)

    @staticmethod
    def _head_note(result: dict) -> str:
        head = result.get("heads", {}).get("pronoun")
        if not head:
            return ""
        return f" · pronoun head L{head['layer']}H{head['head']} {head['score']:.0%}"

    def _on_failed(self, message: str) -> None:
        self._finish_worker()
        self._show_message(message)
        self.status.setText("")
        self.runEnded.emit("failed")

    # -- after a run: snapshots -------------------------------------------------------------
    def show_snapshot(self, index: int) -> None:
        if self.outcome is None:
            return
        history = self.outcome.history
        index = int(np.clip(index, 0, len(history.snapshots) - 1))
        step = history.snapshot_steps[index]
        table = history.snapshots[index]
        self.embedding.show(self.map.fixed(table), f"2. E at step {step} (axes: the final table's PCA)",
                            grow_only=False)
        self.separation.show(np.asarray(history.snapshot_steps), np.asarray(history.separation), step)
        self._fill_table(table)
        model_step = history.nearest_model_step(step)
        self.snapshot_label.setText(f"step {step} of {history.total_steps}"
                                    + (f" · model at {model_step}" if model_step is not None else ""))
        self._explain(snapshot=index)

    def selected_model_step(self) -> Optional[int]:
        if self.outcome is None:
            return None
        history = self.outcome.history
        return history.nearest_model_step(history.snapshot_steps[self.slider.value()])

    def snapshot_folder(self, step: int) -> Path:
        """The kept model of `step` written as a model folder (in a temporary folder the view
        owns), ready for the loader."""
        outcome = self.outcome
        folder = Path(self._temporary.name) / f"{outcome.recipe.name}-seed{outcome.recipe.seed}-step{step}"
        if not (folder / "config.json").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            params = outcome.history.models[step]
            config = outcome.recipe.model_config(len(params["wte"])).replace(
                name=f"transformer-stepper {outcome.recipe.name}, step {step}")
            save_model_folder(folder, TrainedModel(config, params, outcome.tokenizer, outcome.recipe,
                                                   {"step": step}))
        return folder

    def open_snapshot(self) -> None:
        step = self.selected_model_step()
        if step is None or self.open_in_stepper is None:
            return
        self.open_in_stepper(str(self.snapshot_folder(step)))

    def ask_save(self) -> None:
        if self.outcome is None or self.outcome.trained is None:
            return
        chosen, _ = QFileDialog.getSaveFileName(self, "Save the trained model as a folder",
                                                str(Path.home() / f"{self.outcome.recipe.name}-model"))
        if chosen:
            self.save_to(chosen)

    def save_to(self, path: str) -> bool:
        try:
            write_model_folder(Path(path), self.outcome.trained, self.outcome.history)
        except ModelError as exc:
            warn(self, "Could not save the model", str(exc))
            self._show_message(str(exc))
            return False
        self.status.setText(f"saved {path}")
        return True

    # -- table, explanation, messages -------------------------------------------------------------
    def chosen_words(self) -> list[str]:
        words = [w.strip().lower() for w in self.words_box.text().split(",")]
        return [w for w in words if w in self.words][:8]

    def _words_changed(self) -> None:
        self.embedding.set_labelled(self.chosen_words())
        if self.outcome is not None:
            self.show_snapshot(self.slider.value())
        elif self.last_frame is not None:
            self._fill_table(self.last_frame.table)

    def _fill_table(self, table: Optional[np.ndarray]) -> None:
        words = self.chosen_words()
        self.table.setRowCount(len(words))
        self.table.setVerticalHeaderLabels(words)
        if table is None:
            return
        ids, cosines = nearest_words(table, [self.words.index(w) for w in words], N_NEIGHBOURS,
                                     exclude=self.special_ids)
        for row in range(len(words)):
            for column in range(N_NEIGHBOURS):
                word = self.words[ids[row, column]]
                item = QTableWidgetItem(f"{word} {cosines[row, column]:.2f}")
                item.setToolTip(f"'{word}' ({self.classes[ids[row, column]]}): cosine "
                                f"{cosines[row, column]:.4f}")
                self.table.setItem(row, column, item)
        self.nearest_now = {w: [self.words[i] for i in ids[r]] for r, w in enumerate(words)}

    def _explain(self, snapshot: Optional[int] = None) -> None:
        values, flags = {"n_vocab": len(self.words), "d_model": "d_model", "quick_note": QUICK_NOTE}, {}
        frame = self.last_frame
        if frame is not None:
            flags["started"] = True
            history = self.outcome.history if self.outcome is not None else None
            steps = np.asarray(history.snapshot_steps) if history else frame.snapshot_steps
            seps = np.asarray(history.separation) if history else frame.separation
            sep_index = snapshot if snapshot is not None else len(seps) - 1
            words = self.chosen_words()
            nn_word = words[0] if words else ""
            nn_now = ", ".join(getattr(self, "nearest_now", {}).get(nn_word, []))
            flags.update(heldout=len(frame.heldout_losses) > 0, separation=len(seps) > 0,
                         later=len(seps) > 0 and int(steps[sep_index]) > int(steps[0]),
                         scrubbed=len(seps) > 0 and int(steps[sep_index]) != frame.step,
                         nn=bool(nn_now))
            heldout = f"{frame.heldout_losses[-1]:.3f}" if len(frame.heldout_losses) else ""
            values.update(
                d_model=frame.table.shape[1], step=frame.step, steps=frame.steps,
                tokens=f"{frame.tokens:,}", loss=f"{frame.train_losses[-1]:.3f}", heldout=heldout,
                unigram=f"{frame.unigram_loss:.3f}", batch_rows=len(frame.batch_ids),
                map_note="a PCA refitted each frame and turned to match the one before"
                if snapshot is None else "every snapshot on the final table's PCA axes",
                sep_first=f"{seps[0]:.3f}" if len(seps) else "",
                sep_first_step=int(steps[0]) if len(steps) else 0,
                sep_now=f"{seps[sep_index]:.3f}" if len(seps) else "",
                sep_step=int(steps[sep_index]) if len(steps) else 0, nn_word=nn_word, nn_now=nn_now)
        markdown = explanations.render(explanations.template("training"), values, flags)
        self.explanation.show_markdown(markdown)

    def _show_message(self, message: str) -> None:
        self.message.setText(f"⚠ {message}" if message else "")
        self.message.setVisible(bool(message))

    def _hovered(self, text: str) -> None:
        self.readout.setText(text)

    # -- closing ----------------------------------------------------------------------------------
    def shutdown(self, msecs: int = -1) -> bool:
        """Stop a run and wait for its job (window close, tab host shutdown, tests)."""
        worker = self.worker
        if worker is None:
            return True
        worker.stop()
        done = worker.wait(msecs) if msecs >= 0 else worker.wait()
        if done:
            worker.finished_run.disconnect()
            worker.frame.disconnect()
            worker.failed.disconnect()
            self.worker = None
            self._pending = None
            self._set_running(False)
        return bool(done)

    def closeEvent(self, event) -> None:
        self.shutdown()
        self._temporary.cleanup()
        super().closeEvent(event)
