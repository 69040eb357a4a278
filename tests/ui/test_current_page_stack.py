"""A stack of pages asks for its shown page's minimum size, not its widest page's: otherwise one
wide page (the translation window's Interventions table) makes every other page scroll sideways
on a laptop screen."""
from PySide6.QtWidgets import QLabel, QWidget

from transformer_stepper.ui.reflow import CurrentPageStack
from transformer_stepper.ui.seq2seq.window import TranslationWindow


def test_the_stack_asks_for_the_shown_page_only(qtbot):
    stack = CurrentPageStack()
    qtbot.addWidget(stack)
    wide, narrow = QWidget(), QLabel("a short page")
    wide.setMinimumWidth(900)
    stack.addWidget(wide)
    stack.addWidget(narrow)
    stack.setCurrentWidget(narrow)
    assert stack.minimumSizeHint().width() < 900
    stack.setCurrentWidget(wide)
    assert stack.minimumSizeHint().width() >= 900
    stack.setCurrentWidget(narrow)
    assert stack.minimumSizeHint().width() < 900


def test_the_translation_windows_pages_do_not_take_the_interventions_width(qtbot):
    window = TranslationWindow("The bank of the river.")
    qtbot.addWidget(window)
    panel_width = window.interventions_panel.minimumSizeHint().width()
    window.pages.setCurrentWidget(window.velan_page)
    assert window.pages.minimumSizeHint().width() < panel_width
    window.pages.setCurrentWidget(window.interventions_panel)
    assert window.pages.minimumSizeHint().width() >= panel_width
    window.workers.wait()
