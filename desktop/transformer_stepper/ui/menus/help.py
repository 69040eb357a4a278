"""The Help menu: About (version; the open model's source and licence when its folder says),
the keyboard shortcuts, and "What am I looking at?", built from the explanation texts."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMessageBox, QTextBrowser, QVBoxLayout

from ... import __version__
from ...core.model import stages
from ..explain import explanations

SHORTCUTS = (
    ("→  or  Alt+→  or  Page Down", "next stage (after a layer's output: the next layer)"),
    ("←  or  Alt+←  or  Page Up", "previous stage"),
    ("Alt+↓ / Alt+↑", "next / previous layer"),
    ("Ctrl+] / Ctrl+[  or  Alt+Shift+↓ / Alt+Shift+↑", "next / previous head"),
    ("Alt+Home", "first stage"),
    ("Ctrl+L", "edit the text (← / → then move the cursor)"),
    ("Esc (in the text box)", "give ← / → back to stepping"),
    ("Ctrl+O", "open a model folder"),
    ("Ctrl+Q", "quit"),
    ("right-click a plot", "export it as PNG or SVG"),
    ("Alt-click (or Ctrl-click) a value", "where it comes from: its arithmetic, Copy as Python"),
)


def model_provenance(path: Optional[str]) -> tuple[str, str]:
    """(source, licence) of a model folder, from its config.json / README.md front matter
    (how the Hugging Face hub writes them), else 'unknown'."""
    if not path:
        return "the project's own built-in model (trained by its numpy code)", "MIT (this project's)"
    folder = Path(path)
    folder = folder if folder.is_dir() else folder.parent
    source, licence = "unknown", "unknown"
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if isinstance(cfg.get("_name_or_path"), str) and cfg["_name_or_path"]:
            source = cfg["_name_or_path"]
        if isinstance(cfg.get("license"), str):
            licence = cfg["license"]
    except (OSError, ValueError):
        pass
    try:
        readme = (folder / "README.md").read_text(encoding="utf-8")[:4000]
        match = re.search(r"^license:\s*(\S+)", readme, re.M)
        if match:
            licence = match.group(1)
    except (OSError, ValueError):
        pass
    return source, licence


def about_text(window) -> str:
    model = window.session.model
    lines = [f"<h3>Transformer Stepper {__version__}</h3>",
             "<p>Step through what a transformer computes, stage by stage, with the exact numbers "
             "the model computes.</p>"]
    if model is not None:
        source, licence = model_provenance(window.session.model_path)
        lines.append(f"<p><b>Open model:</b> {model.name} ({model.config.family}), "
                     f"{model.n_params() / 1e6:.2f} M parameters<br><b>Source:</b> {source}<br>"
                     f"<b>Licence:</b> {licence}</p>")
    return "\n".join(lines)


def shortcuts_html() -> str:
    rows = "".join(f"<tr><td><b>{keys}</b></td><td>&nbsp;&nbsp;{what}</td></tr>" for keys, what in SHORTCUTS)
    return f"<h3>Keyboard shortcuts</h3><table>{rows}</table>"


# the dimension vocabulary: what a placeholder reads as in the guide, where no model is open
SYMBOLS = {"n_seq": "n_seq", "d_model": "d_model", "d_head": "d_head", "n_head": "n_head",
           "n_vocab": "n_vocab", "d_ff": "d_ff", "n_layer": "n_layer", "n_ctx": "n_ctx",
           "n_kv_heads": "n_kv_heads", "group_size": "group_size", "n_types": "n_types",
           "layer": "ℓ", "next_layer": "ℓ + 1", "prev_layer": "ℓ − 1", "head": "h",
           "last_layer": "(n_layer − 1)", "last_id": "n_vocab − 1", "last_position": "n_seq − 1",
           "n_states": "n_layer + 1", "activation": "φ", "norm_kind_name": "the norm",
           "eps": "ε", "d_position": "d_model", "d_token": "d_model", "d_input": "d_input"}
_GONE = "\x00"          # a number only a model and a text can give: its sentence is left out
_SENTENCE = re.compile(r"(?<=[.!?:;)])\s+(?=[A-Z*(\[`'\"])")


class _Symbols(dict):
    def __missing__(self, key: str) -> str:
        return _GONE


def generic(text: str) -> str:
    """A stage's explanation for no model in particular: dimensions by their names, and every
    sentence that quotes a number of a trace left out (a heading that does: its section too)."""
    import string

    text = string.Formatter().vformat(text, (), _Symbols(SYMBOLS))
    lines, skipping = [], False
    for line in text.splitlines():
        if line.startswith("#"):
            skipping = _GONE in line
            if not skipping:
                lines.append(line)
            continue
        if skipping:
            continue
        sentences = _SENTENCE.split(line)
        kept = [s for s in sentences if _GONE not in s]
        if kept and kept[0] is not sentences[0] and line.startswith("- "):
            kept[0] = "- " + kept[0]            # the bullet survives its first sentence
        if kept or not line.strip():
            lines.append(" ".join(kept))
    return re.sub(r"(\n\s*){3,}", "\n\n", "\n".join(lines)).strip()


def guide_html() -> str:
    """Every stage's explanation, as for a generic model (no flags on): the dimensions by their
    names; what only a model and a text can say is left to the stage's panel."""
    parts = ["<h2>What am I looking at?</h2><p>The stepper walks one forward pass of the model: "
             "the stages below, in order, the per-layer ones once for every layer. Here the shapes "
             "are named (n_seq tokens, d_model numbers per vector, ℓ the layer, h the head, φ the "
             "activation); each stage's panel in the app fills in the actual shapes and numbers "
             "for the open model and text.</p>"]
    for stage in stages.STAGES:
        text = explanations.render_stage(stage.key, SYMBOLS, {})
        only = (" <small>(mixture-of-experts models only; the stages after it then count one more)</small>"
                if stage.needs_experts else "")
        parts.append(f"<h2>{stage.number}. {stage.title}{only}</h2>" + _markdown(generic(text)))
    return "\n".join(parts)


def _markdown(text: str) -> str:
    from PySide6.QtGui import QTextDocument

    document = QTextDocument()
    document.setMarkdown(text)
    return document.toHtml()


def show_html(window, title: str, html: str, size=(720, 640)) -> QDialog:
    dialog = QDialog(window)
    dialog.setWindowTitle(title)
    layout = QVBoxLayout(dialog)
    browser = QTextBrowser()
    browser.setOpenExternalLinks(False)
    browser.setHtml(html)
    layout.addWidget(browser)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.close)
    layout.addWidget(buttons)
    dialog.resize(*size)
    dialog.show()
    return dialog


def _check(window) -> None:
    from ..model_diff.check_dialog import show_check

    show_check(window)


def add_help_menu(window) -> None:
    menu = window.menuBar().addMenu("&Help")
    menu.addAction("&Questions…", lambda: window.walk_panel.show_list())    # guided walks
    menu.addSeparator()
    menu.addAction("&What Am I Looking At?", lambda: show_html(window, "What am I looking at?", guide_html()))
    menu.addAction("Model &Vocabulary…", window.show_vocabulary)
    menu.addAction("&Keyboard Shortcuts", lambda: show_html(window, "Keyboard shortcuts", shortcuts_html(),
                                                            (520, 380)))
    menu.addSeparator()
    check = menu.addAction("&Check Against Transformers…", lambda: _check(window))
    check.setToolTip("Run Hugging Face transformers (when torch and transformers are installed) on the "
                     "open model and text in a process of its own: per layer the largest |app − HF|")
    menu.addSeparator()
    menu.addAction("&About Transformer Stepper",
                   lambda: QMessageBox.about(window, "About Transformer Stepper", about_text(window)))
    window.help_menu = menu
