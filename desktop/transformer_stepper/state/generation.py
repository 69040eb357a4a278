"""Generation, without Qt: one token, n tokens or until the end of the text, greedy or sampled;
undo; the user's own choice of token. Each step runs in a worker (core.trace.generate.step: only
the new position is computed, the earlier keys and values are reused) and lands in the session
as the trace of the extended text, so every stage shows it; the next step starts when it has.

Typing, opening a model or Stop ends a run; a step that lands after the text changed is
dropped. Whoever binds it to the session calls `on_text(text)` when the session's text is set
and `stop()` when its model changes (ui/generation/generation.py).

It notifies changed() (running or not, steps left, sampling: the controls follow),
failed(str: one line, why a run stopped early) and stepped(int: the id the latest step
appended)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from ..core.trace.generate import Sampling, step
from ..core.trace.model import Model
from ..core.trace.trace import Trace
from .events import Events
from .scheduler import Job

UNTIL_END_LIMIT = 256          # "until the end" stops here at the latest (a model may never end)
# what the common tokenizers call the end of a text
END_TOKENS = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>",
              "<end_of_turn>", "[EOS]")


def end_ids(model: Model) -> tuple[int, ...]:
    """The ids that end a text for this model's tokenizer (none for the built-in model)."""
    ids = (model.tokenizer.token_to_id(name) for name in END_TOKENS)
    return tuple(sorted({i for i in ids if i is not None}))


def why_not(model: Optional[Model], trace: Optional[Trace]) -> str:
    """'' when generation can start from this trace, else why not (a tooltip)."""
    if model is None or trace is None:
        return "open a model and type a text first"
    if not model.can_generate:
        kind = "an encoder (it reads the whole text at once)" if not model.config.causal \
            else "a model without an output head"
        return f"{model.name} cannot generate: it is {kind}"
    if trace.kv_cache is None:
        return "generation starts from a trace without interventions"
    if trace.n_seq >= model.config.n_ctx:
        return f"the context is full: the model reads at most {model.config.n_ctx} tokens"
    return ""


@dataclass(frozen=True)
class StepResult:
    model: Model
    base: Trace                  # the trace the step extended
    trace: Trace
    seconds: float


def _step_task(model: Model, base: Trace, sampling: Sampling, token: Optional[int],
               layer: int) -> StepResult:
    start = time.perf_counter()
    trace = step(model, base, sampling, token)
    trace.prepare(min(layer, model.config.n_layer - 1))     # the layer on screen, off the GUI thread
    return StepResult(model, base, trace, time.perf_counter() - start)


def _undo_task(model: Model, base: Trace) -> StepResult:
    # the last token cut off: nothing recomputed, but the layer on screen is copied (157 ms at
    # 1,000 tokens on GPT-2-small shape), so off the GUI thread too
    start = time.perf_counter()
    return StepResult(model, base, model.truncate(base, base.n_seq - 1), time.perf_counter() - start)


class GenerationModel:
    def __init__(self, session, **rest) -> None:
        """`session`: the SessionModel whose text this extends (its scheduler runs the steps)."""
        super().__init__(**rest)             # cooperative: a QObject adapter's parent
        self.events = Events()
        self.session = session
        self.sampling = Sampling()
        self.left = 0                   # steps still to run in this run
        self.done = 0                   # steps run in this run
        self.step_seconds = 0.0         # the latest step's time in the worker
        self._pending: Optional[int] = None      # the request in flight
        self._stop_ids: tuple[int, ...] = ()

    def _notify(self, name: str, *args) -> None:
        self.events.notify(name, *args)

    # -- state ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._pending is not None

    def why_not(self) -> str:
        return why_not(self.session.model, self.session.trace)

    def set_sampling(self, sampling: Sampling) -> None:
        if sampling != self.sampling:
            self.sampling = sampling
            self._notify("changed")

    def end_ids(self) -> tuple[int, ...]:
        return end_ids(self.session.model) if self.session.model is not None else ()

    # -- actions ----------------------------------------------------------------------
    def generate(self, n_tokens: int) -> bool:
        """Append n_tokens chosen by the sampling settings, one step at a time."""
        if n_tokens < 1 or self.running or self.session.busy or self.why_not():
            return False
        self.left, self.done = n_tokens, 0
        self._stop_ids = ()
        return self._next()

    def generate_until_end(self) -> bool:
        """Until the model writes an end-of-text token, the context is full, or UNTIL_END_LIMIT."""
        if not self.generate(UNTIL_END_LIMIT):
            return False
        self._stop_ids = self.end_ids()
        return True

    def append(self, token_id: int) -> bool:
        """Append the user's choice instead of the model's (steering)."""
        if self.running or self.session.busy or self.why_not():
            return False
        self.left, self.done, self._stop_ids = 1, 0, ()
        return self._next(token_id)

    def undo(self) -> bool:
        """Remove the last generated token: the trace cut back in a worker (nothing recomputed)."""
        session, trace = self.session, self.session.trace
        if self.running or session.busy or trace is None or not trace.generated.any() \
                or not trace.generated[-1]:
            return False
        self.left, self._stop_ids = 0, ()
        self._pending = session.next_request()
        self._notify("changed")
        session.workers.start(Job(self._pending, _undo_task, (session.model, trace)),
                              self._on_undone, self._on_failed)
        return True

    def _on_undone(self, request_id: int, result: StepResult) -> None:
        session = self.session
        if request_id != self._pending:
            return
        self._pending = None
        if result.model is session.model and result.base is session.trace:   # else: changed meanwhile
            session.show_trace(result.trace, 0.0)
            session.select_token(result.trace.n_seq - 1)
        self._notify("changed")

    def can_undo(self) -> bool:
        trace = self.session.trace
        return (not self.running and trace is not None and trace.n_seq > 0
                and bool(trace.generated[-1]))

    def stop(self) -> None:
        if self._pending is not None or self.left:
            self._pending, self.left = None, 0
            self._notify("changed")

    # -- the steps --------------------------------------------------------------------
    def _next(self, token: Optional[int] = None) -> bool:
        session = self.session
        self._pending = session.next_request()
        self._notify("changed")
        session.workers.start(
            Job(self._pending, _step_task, (session.model, session.trace, self.sampling, token,
                                            session.layer)),
            self._on_step, self._on_failed)
        return True

    def _on_step(self, request_id: int, result: StepResult) -> None:
        session = self.session
        if request_id != self._pending:
            return
        if result.model is not session.model or result.base is not session.trace:
            self.stop()                            # the text or model changed meanwhile
            return
        self._pending = None
        self.left -= 1
        self.done += 1
        self.step_seconds = result.seconds
        session.show_trace(result.trace, result.seconds)
        session.select_token(result.trace.n_seq - 1)       # the newest token: its prediction, its row
        token = int(result.trace.input_ids[-1])
        self._notify("stepped", token)
        reason = why_not(session.model, result.trace)
        if token in self._stop_ids:
            self.left = 0
        elif self.left > 0 and reason:
            self.left = 0
            self._notify("failed", f"stopped after {self.done} tokens: {reason}")
        if self.left > 0:
            self._next()
        else:
            self._notify("changed")

    def _on_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if request_id != self._pending:
            return
        self._pending, self.left = None, 0
        self._notify("changed")
        self._notify("failed", message if user_error else f"generation failed: {message}")

    def on_text(self, text: str) -> None:
        trace = self.session.trace
        if self.running and (trace is None or text != trace.text):   # the user typed
            self.stop()

