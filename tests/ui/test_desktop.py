"""A desktop app from the first second: → steps at launch with no click, the text box keeps
the arrow keys for its cursor (Esc gives them back, Alt+arrows step from it), the Go and Help
menus, the window icon, the launcher entry and --version."""
import re
import subprocess
import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from transformer_stepper import __version__
from transformer_stepper.cli import main
from transformer_stepper.ui.menus import help as app_help
from transformer_stepper.ui.app import app_icon


def test_right_arrow_steps_at_launch_without_a_click(qtbot, loaded_window):
    window = loaded_window("gpt2")
    window.activateWindow()
    focus = QApplication.focusWidget() or window.stepper.stack
    assert focus is not window.stepper.text_box, "the text box must not take the arrow keys at launch"
    start = window.session.stage_key
    qtbot.keyClick(focus, Qt.Key.Key_Right)
    assert window.session.stage_key != start and window.session.stage_key == "embedding"


def test_text_box_keeps_arrows_until_escape_and_alt_arrows_step_from_it(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    window.stepper.text_box.setFocus()
    window.stepper.text_box.setCursorPosition(3)
    qtbot.keyClick(window.stepper.text_box, Qt.Key.Key_Right)
    assert window.stepper.text_box.cursorPosition() == 4 and session.stage_key == "tokenize"
    qtbot.keyClick(window.stepper.text_box, Qt.Key.Key_Right, Qt.KeyboardModifier.AltModifier)
    assert session.stage_key == "embedding"
    qtbot.keyClick(window.stepper.text_box, Qt.Key.Key_PageDown)
    assert session.stage_key == "position_encoding"
    qtbot.keyClick(window.stepper.text_box, Qt.Key.Key_Escape)
    assert not window.stepper.text_box.hasFocus()
    qtbot.keyClick(QApplication.focusWidget() or window.stepper.stack, Qt.Key.Key_Left)
    assert session.stage_key == "embedding"


def test_go_and_help_menus_and_their_shortcuts_are_shown(qtbot, loaded_window):
    window = loaded_window("gpt2")
    go = [a.text() for a in window.go_menu.actions() if a.text()]
    assert any("Next" in t for t in go) and any("Layer" in t for t in go)
    assert "→" in window.next_action.toolTip() and "Alt+→" in window.next_action.toolTip()
    titles = [a.text().replace("&", "") for a in window.help_menu.actions() if a.text()]
    assert titles == ["Questions…", "What Am I Looking At?", "Model Vocabulary…", "Keyboard Shortcuts",
                      "Check Against Transformers…",
                      "About Transformer Stepper"]
    guide = app_help.guide_html()
    assert "Softmax" in guide and not re.search(r"\{[a-z_]+\}", guide), "unfilled placeholders"
    assert "Alt+" in app_help.shortcuts_html()
    assert __version__ in app_help.about_text(window) and "tiny-gpt2" in app_help.about_text(window)
    dialog = app_help.show_html(window, "Keyboard shortcuts", app_help.shortcuts_html())
    qtbot.addWidget(dialog)
    assert dialog.isVisible()


def test_the_window_icon_has_every_size():
    sizes = {(s.width(), s.height()) for s in app_icon().availableSizes()}
    assert {(16, 16), (32, 32), (48, 48), (256, 256)} <= sizes


def test_version_and_python_m(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"transformer-stepper {__version__}"
    out = subprocess.run([sys.executable, "-m", "transformer_stepper", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--install-desktop-entry" in out and "trace" in out and "export" in out


def test_desktop_entry_is_written_and_removed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert main(["--install-desktop-entry"]) == 0
    entry = tmp_path / "applications" / "transformer-stepper.desktop"
    text = entry.read_text()
    assert "Exec=" in text and "Icon=transformer-stepper" in text and "Name=Transformer Stepper" in text
    assert (tmp_path / "icons/hicolor/256x256/apps/transformer-stepper.png").is_file()
    assert (tmp_path / "icons/hicolor/scalable/apps/transformer-stepper.svg").is_file()
    assert main(["--uninstall-desktop-entry"]) == 0
    assert not entry.exists() and not list(tmp_path.rglob("transformer-stepper*"))
    assert main(["--uninstall-desktop-entry"]) == 0
    assert "no desktop entry was installed" in capsys.readouterr().out
