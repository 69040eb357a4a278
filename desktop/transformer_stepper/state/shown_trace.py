"""What the stage views draw, without Qt: the clean trace, the intervened pass, or A − B (a
second model's trace of the same text against this one), and the requests of the interventions.

The interventions: the active ones, the intervened trace of the current text (run beside the
clean one in a worker, again whenever the clean trace changes; the latest request wins) and
whether the stepper shows it. `trace` is always the clean model's; `shown_trace` is what the
stage views draw, so showing the clean model again is only a flag: nothing is recomputed or
restored. One mode at a time: showing the intervened pass turns A − B off, and back.

SessionModel (state/session.py) builds on it: it opens models and traces text, and calls
`_run_interventions` for each new clean trace. Besides the ViewModel's, it notifies
interventionsChanged(), interventionFailed(str) and differenceChanged()."""
from __future__ import annotations

from typing import Optional

from ..core.trace.trace import Trace
from .jobs import InterventionResult, run_interventions
from .requests import Latest, Requests
from .scheduler import Job, Scheduler
from .view import ViewModel

# the Interventions tab's controls (a checkbox, a spin box) settle this long before the
# intervened pass runs: ticking several heads in a row runs one pass
INTERVENTIONS_DEBOUNCE_MS = 60


class ShownTraceModel(ViewModel):
    def __init__(self, scheduler: Scheduler, **rest) -> None:
        super().__init__(**rest)
        self.workers = scheduler
        self._requests = Requests()     # every load, compute, layer or generation step: a number
        self._intervening = Latest(self._requests)
        self._interventions: tuple = ()
        self._intervention: Optional[InterventionResult] = None   # for the current clean trace
        self._show_intervened = False
        self._against: Optional[tuple] = None      # (A's trace, B's trace of its text, B's name)
        self._against_model = None                 # B (the model of the trace in _against)
        self._show_difference = False
        self._requested_interventions: tuple = ()
        self._interventions_debounce = scheduler.timer(INTERVENTIONS_DEBOUNCE_MS,
                                                       self._apply_requested_interventions)

    @property
    def shown_trace(self) -> Optional[Trace]:
        """What the stepper's stage views draw: the intervened trace while the user shows it
        (and it is in), else the clean one."""
        return self._intervention.trace if self.showing_intervened else self.trace

    # -- interventions --------------------------------------------------------------------
    @property
    def interventions(self) -> tuple:
        """The active interventions (core/model/interventions.py); () for none."""
        return self._interventions

    @property
    def intervention(self) -> Optional[InterventionResult]:
        """The intervened trace of the current clean trace and the differences at every stage;
        None while it runs, or without interventions."""
        return self._intervention

    @property
    def intervened_trace(self) -> Optional[Trace]:
        return None if self._intervention is None else self._intervention.trace

    @property
    def show_intervened(self) -> bool:
        """The user asked the stepper to show the intervened pass (off without interventions)."""
        return self._show_intervened

    @property
    def showing_intervened(self) -> bool:
        """... and it is there to show (not while it runs for a new text)."""
        return self._show_intervened and self._intervention is not None

    def request_interventions(self, interventions) -> None:
        """set_interventions once the controls rest (INTERVENTIONS_DEBOUNCE_MS after the last
        request); the latest request wins."""
        self._requested_interventions = tuple(interventions)
        self._interventions_debounce.start()

    def _apply_requested_interventions(self) -> None:
        self.set_interventions(self._requested_interventions)

    def set_interventions(self, interventions) -> None:
        """Change the interventions: the intervened pass runs in a worker; none turns showing
        it off. A request still resting (request_interventions) is replaced."""
        self._interventions_debounce.stop()
        interventions = tuple(interventions)
        if interventions == self._interventions:
            return
        was_showing = self._show_intervened
        self._interventions, self._intervention = interventions, None
        self._intervening.drop()                        # a pass under way is stale now
        if not interventions:
            self._show_intervened = False
        self._run_interventions()
        self._notify("interventionsChanged")
        self._shown_changed(was_showing)

    def set_show_intervened(self, on: bool) -> None:
        on = bool(on) and bool(self._interventions)
        if on != self._show_intervened:
            was_showing = self._show_intervened
            if on:
                self.set_show_difference(False)     # one mode at a time
            self._show_intervened = on
            self._notify("interventionsChanged")
            self._shown_changed(was_showing)

    @property
    def waiting_for_intervened(self) -> bool:
        """Showing the intervened pass was asked for, and it is still running (the stage views
        say so rather than draw the clean model)."""
        return self._show_intervened and self._intervention is None

    def _shown_changed(self, was_showing: bool) -> None:
        if was_showing or self._show_intervened:
            self._notify("shownTraceChanged")

    def _run_interventions(self) -> None:
        if not self._interventions or self._trace is None or self._model is None:
            return
        self.workers.start(Job(self._intervening.new(), run_interventions,
                               (self._model, self._trace, self._interventions)),
                           self._on_intervened, self._on_intervention_failed)

    def _on_intervened(self, request_id: int, result: InterventionResult) -> None:
        if (not self._intervening.is_latest(request_id) or result.clean is not self._trace
                or result.interventions != self._interventions):
            return
        was_showing = self._show_intervened
        self._intervention = result
        self._notify("interventionsChanged")
        self._shown_changed(was_showing)

    def _on_intervention_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if self._intervening.is_latest(request_id):
            self._notify("interventionFailed", message)

    def _drop_interventions(self) -> None:
        """Another model opened: no interventions, none resting, none running."""
        self._interventions, self._intervention, self._show_intervened = (), None, False
        self._drop_pending_interventions()

    def _drop_pending_interventions(self) -> None:
        self._interventions_debounce.stop()
        self._intervening.drop()

    # -- a second model against this one: the stage views show A − B -----------------------
    @property
    def against(self) -> Optional[Trace]:
        """B's trace of the current text while the stage views show A − B, else None."""
        pair = self._against
        if self._show_difference and pair is not None and pair[0] is self._trace:
            return pair[1]
        return None

    @property
    def against_name(self) -> str:
        return "" if self._against is None else self._against[2]

    @property
    def can_show_difference(self) -> bool:
        """A second model is open against this one (the Two Models tab)."""
        return self._against is not None

    @property
    def show_difference(self) -> bool:
        return self._show_difference

    @property
    def waiting_for_against(self) -> bool:
        """A − B is asked for and B's trace of the current text is still running."""
        return self._show_difference and self._trace is not None and self.against is None

    @property
    def against_model(self):
        """B, while its trace is `against` (the provenance panel explains a difference in both)."""
        return None if self.against is None else self._against_model

    def set_against(self, trace_a: Optional[Trace], trace_b: Optional[Trace], name: str = "",
                    model_b=None) -> None:
        """The Two Models tab's latest pair of traces (None: B closed or refused) and B: the
        stage views draw their difference while the user shows it."""
        self._against = None if trace_a is None or trace_b is None else (trace_a, trace_b, name)
        self._against_model = None if self._against is None else model_b
        if self._against is None and trace_a is None:
            self._show_difference = False
        self._notify("differenceChanged")
        if self._show_difference or self._against is None:
            self._notify("shownTraceChanged")

    def set_show_difference(self, on: bool) -> None:
        on = bool(on) and self._against is not None
        if on != self._show_difference:
            if on:
                self.set_show_intervened(False)     # one mode at a time
            self._show_difference = on
            self._notify("differenceChanged")
            self._notify("shownTraceChanged")
