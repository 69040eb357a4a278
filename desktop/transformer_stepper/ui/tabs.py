"""The main window's tabs, in order: the stepper, then the views beside it. Adding a view is one
entry in TABS: its key, its title, and how to create it for a window. A view is created the
first time its tab is shown, so the app starts as fast with ten tabs as with one."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from .reflow import scrolling


def _stepper(window) -> QWidget:
    return window.stepper                 # built by the window itself (ui/stepper/stepper_view.py)


def _compare(window) -> QWidget:
    from .compare import CompareView

    return CompareView(window.session, window.settings)


def _attribution(window) -> QWidget:
    from .interventions.attribution_view import AttributionView

    return AttributionView(window.session, window.settings)


def _interventions(window) -> QWidget:
    from .interventions.interventions_view import InterventionsView

    # a difference-map cell opens its stage in the Stepper
    return InterventionsView(window.session, window.settings,
                             show_stepper=lambda: window.tabs.show_tab("stepper"))


def _training(window) -> QWidget:
    from .training import TrainingView

    def open_in_stepper(path: str) -> None:
        window.open_model(path)
        window.tabs.show_tab("stepper")

    return TrainingView(window.settings, open_in_stepper, workers=window.session.workers)


def _positions(window) -> QWidget:
    from .positions import PositionsView

    def open_in_stepper(path: str) -> None:
        window.open_model(path)
        window.tabs.show_tab("stepper")

    return PositionsView(window.session, window.settings, open_in_stepper)


def _model_diff(window) -> QWidget:
    from .model_diff import TwoModelsView

    # "Show A − B in the Stepper" opens the Stepper at the stage of the drift map's cell
    return TwoModelsView(window.session, window.settings, show_stepper=lambda: window.tabs.show_tab("stepper"))


@dataclass(frozen=True)
class Tab:
    key: str
    title: str
    create: Callable[[object], QWidget]


TABS: tuple[Tab, ...] = (
    Tab("stepper", "Stepper", _stepper),
    Tab("compare", "Compare", _compare),
    Tab("training", "Training", _training),
    Tab("positions", "Positions", _positions),
    Tab("attribution", "Attribution", _attribution),
    Tab("interventions", "Interventions", _interventions),
    Tab("model_diff", "Two Models", _model_diff),
)


class TabHost(QTabWidget):
    def __init__(self, window, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.window_ = window
        self.setDocumentMode(True)
        self.views: dict[str, QWidget] = {}
        self._holders: list[QWidget] = []
        for tab in TABS:
            holder = QWidget()
            layout = QVBoxLayout(holder)
            layout.setContentsMargins(0, 0, 0, 0)
            self._holders.append(holder)
            self.addTab(holder, tab.title)
        self.currentChanged.connect(self._ensure)
        self._ensure(self.currentIndex())

    def _ensure(self, index: int) -> None:
        if 0 <= index < len(TABS):
            self.view(TABS[index].key)

    def view(self, key: str) -> QWidget:
        """The tab's view, created if it was not yet."""
        if key not in self.views:
            index = [tab.key for tab in TABS].index(key)
            view = TABS[index].create(self.window_)
            # the view keeps its minimum size and scrolls inside its tab: no tab raises the
            # window's minimum size past a laptop's screen
            self._holders[index].layout().addWidget(scrolling(view))
            self.views[key] = view
        return self.views[key]

    def current_key(self) -> str:
        return TABS[self.currentIndex()].key if 0 <= self.currentIndex() < len(TABS) else ""

    def show_tab(self, key: str) -> QWidget:
        view = self.view(key)
        self.setCurrentIndex([tab.key for tab in TABS].index(key))
        return view

    def shutdown(self) -> None:
        """Window close: views that run work of their own stop it, and every view is closed,
        which undoes its connections and frees what it holds (the Training tab's folder of
        snapshots: a tab inside the window gets no close event of its own)."""
        for key, view in self.views.items():
            if key != "stepper":
                if hasattr(view, "shutdown"):
                    view.shutdown()
                view.close()
