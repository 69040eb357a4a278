"""Two encoder–decoders side by side, without Qt: the translator opened against the translation
window's (B, the reference of every ratio; the window's is A), the diff of their traces of the
window's source and target (core/analysis/seq2seq_diff.py: both stacks and the
cross-attention), and the logic of its requests on the window's Scheduler.

Each new trace of A (typing, a step, Translate) is handed to `set_trace`, which traces B on A's
source text and A's target ids and compares, in a worker; `set_layer` prepares B's detail of
the layer the window shows (A's is the window's own request), so the stage views' A − B reads
both without computing on the GUI thread. Each kind of request has its Latest: a result that is
no longer the latest is dropped, a diff still running for an older trace is cancelled.
Notifies, through `events`: changed() (a new diff, B, or a message), busy(bool, str),
ready(int) (B's layer prepared)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.analysis import model_diff, seq2seq_diff
from ..core.model.errors import ModelError
from ..io.loader import load_model
from .events import Events
from .requests import Latest, Requests
from .scheduler import Job, Scheduler

LANE = "seq2seq_diff"         # its own thread: the window's tracing never waits behind a diff
NAMES = ("the open translator", "the compared translator")


@dataclass(frozen=True)
class TranslatorsDiff:
    trace_a: object               # Seq2SeqTrace
    trace_b: object
    diff: seq2seq_diff.Seq2SeqDiff


def open_other(path: str, model_a, trace_a, layer: int = 0, progress=None):
    """Worker: open B, refuse what cannot be compared with A, and diff A's trace."""
    model_b = load_model(path)
    if not getattr(model_b, "is_seq2seq", False):
        raise ModelError(f"{path}: a {model_b.config.family} model is not an encoder–decoder: "
                         "compare it with a one-stack model in the main window's Two Models tab")
    seq2seq_diff.check_same_seq2seq_shape(model_a.config, model_b.config, ("the open translator", path))
    result = None if trace_a is None else trace_and_diff(model_a, trace_a, model_b, layer, progress)
    return model_b, result


def trace_b_like(trace_a, model_b):
    """B on A's source text and A's target ids, refused in one line when B's tokenizer gives
    other source ids, or reads A's target ids as other pieces (its vocabulary differs)."""
    encoded, _ = model_b.encode_source(trace_a.source_text)
    try:
        model_diff.check_same_tokens(trace_a.encoder.input_ids, trace_a.encoder.tokens,
                                     encoded.input_ids, encoded.tokens, NAMES)
    except ModelError as exc:
        raise ModelError(f"the source: {exc}") from None
    if int(trace_a.decoder.input_ids[0]) != model_b.config.decoder_start_token_id:
        raise ModelError(f"the decoders start from other tokens: id {int(trace_a.decoder.input_ids[0])} in "
                         f"{NAMES[0]}, {model_b.config.decoder_start_token_id} in {NAMES[1]}")
    trace_b = model_b.trace(trace_a.source_text, target_ids=trace_a.decoder.input_ids[1:])
    pieces_a, pieces_b = trace_a.decoder.tokens, trace_b.decoder.tokens
    for t, (a, b) in enumerate(zip(pieces_a, pieces_b)):
        if a != b:
            raise ModelError(f"the target: the tokenizers differ at token {t}: {NAMES[0]} reads id "
                             f"{int(trace_a.decoder.input_ids[t])} as {a!r}, {NAMES[1]} as {b!r}")
    return trace_b


def trace_and_diff(model_a, trace_a, model_b, layer: int = 0, progress=None) -> TranslatorsDiff:
    """Worker: B on A's source and target, both stacks and the cross-attention compared, and
    B's detail of `layer` prepared; progress after each step (a cancelled job stops there)."""
    report = progress or (lambda done, total: None)
    trace_b = trace_b_like(trace_a, model_b)
    report(1, 3)
    diff = seq2seq_diff.diff_seq2seq(trace_a, trace_b, names=(model_a.name, model_b.name))
    report(2, 3)
    prepare(trace_b, layer)
    return TranslatorsDiff(trace_a, trace_b, diff)


def prepare(trace, layer: int):
    """Worker: a layer's detail of both stacks (what the stage views read)."""
    for stack in (trace.encoder, trace.decoder):
        stack.prepare(min(layer, stack.config.n_layer - 1))
    return layer


class TwoTranslators:
    def __init__(self, scheduler: Scheduler) -> None:
        self.workers = scheduler
        self.events = Events()
        self._requests = Requests()
        self._open, self._diff, self._layer = Latest(self._requests), Latest(self._requests), Latest(self._requests)
        self._running: Optional[Job] = None
        self.model_a = self.model_b = None
        self.path_b: Optional[str] = None
        self.result: Optional[TranslatorsDiff] = None
        self.layer = 0
        self.message = ""             # why there is no diff (a refusal, a failure), one line
        self.busy = False

    @property
    def name_b(self) -> str:
        """B's name, or its path where it bears A's name (a copy of A's folder)."""
        if self.model_b is None:
            return ""
        same = self.model_a is not None and self.model_a.name == self.model_b.name
        return self.path_b if same and self.path_b else self.model_b.name

    # -- requests --------------------------------------------------------------------------
    def open_other(self, path: str, model_a, trace_a) -> None:
        """Open B against A (the window's translator) and diff A's trace."""
        self._diff.drop()
        self._cancel_running()
        number = self._open.new()
        self.model_a = model_a
        self._start(Job(number, open_other, (path, model_a, trace_a, self.layer), reports=True, lane=LANE),
                    lambda n, value: self._opened(n, path, value), f"Opening {path}…")

    def set_trace(self, model_a, trace_a) -> None:
        """The window's new trace of A: B follows it (a new A is checked against B again)."""
        if self.model_b is None or trace_a is None:
            return
        if model_a is not self.model_a:
            self.model_a = model_a
            try:
                seq2seq_diff.check_same_seq2seq_shape(model_a.config, self.model_b.config,
                                                      ("the open translator", self.path_b))
            except ModelError as exc:
                self._drop_result(str(exc))
                return
        self._cancel_running()
        number = self._diff.new()
        self._start(Job(number, trace_and_diff, (model_a, trace_a, self.model_b, self.layer), reports=True,
                        lane=LANE), self._diffed, "Tracing the compared translator…")

    def set_layer(self, layer: int) -> None:
        """The window shows `layer`: B's detail of it prepared in a worker (then ready(layer))."""
        self.layer = layer
        result = self.result
        if result is None:
            return
        number = self._layer.new()
        self.workers.start(Job(number, prepare, (result.trace_b, layer), lane=LANE),
                           self._prepared, self._failed)

    def close_other(self) -> None:
        for latest in (self._open, self._diff, self._layer):
            latest.drop()
        self._cancel_running()
        self.model_b = self.path_b = self.result = None
        self._set_busy(False)
        self._say("")

    # -- results ---------------------------------------------------------------------------
    def _start(self, job: Job, done, what: str) -> None:
        self._running = job
        self._set_busy(True, what)
        self.workers.start(job, done, self._failed, None, self._cancelled)

    def _opened(self, number: int, path: str, value) -> None:
        if self._open.is_latest(number):
            self.model_b, self.path_b = value[0], path
            self._show(value[1])

    def _diffed(self, number: int, result: TranslatorsDiff) -> None:
        if self._diff.is_latest(number):
            self._show(result)

    def _show(self, result: Optional[TranslatorsDiff]) -> None:
        self._running = None
        self._set_busy(False)
        self.result = result
        self._say("")
        if result is not None and not all(stack.is_ready(min(self.layer, stack.config.n_layer - 1))
                                          for stack in (result.trace_b.encoder, result.trace_b.decoder)):
            self.set_layer(self.layer)       # the layer changed while B ran: prepare the one shown now

    def _prepared(self, number: int, layer: int) -> None:
        if self._layer.is_latest(number) and self.result is not None:
            self.events.notify("ready", layer)

    def _failed(self, number: int, message: str, user_error: bool = True) -> None:
        if number in (self._open.number, self._diff.number):
            self._drop_result(" ".join(message.split()))

    def _drop_result(self, message: str) -> None:
        self._running = None
        self._set_busy(False)
        self.result = None
        self._say(message)

    def _cancelled(self, number: int) -> None:
        if number in (self._open.number, self._diff.number):
            self._set_busy(False)

    def _cancel_running(self) -> None:
        if self._running is not None:
            self._running.cancel()
            self._running = None

    def _set_busy(self, busy: bool, what: str = "") -> None:
        self.busy = busy
        self.events.notify("busy", busy, what)

    def _say(self, message: str) -> None:
        self.message = message
        self.events.notify("changed")


class ShowsAgainst:
    """A view state of one stack of the translation window (state/view.py's ViewModel) that can
    show A − B: B's trace of the same stack, its model and name, and whether the window shows
    the difference. B's trace is handed on only when its detail of the state's layer is
    prepared (`waiting_for_against` meanwhile), so no view computes B's layer on the GUI thread."""
    _against = None
    _against_model = None
    _against_name = ""
    _show_difference = False
    pair_names = ("A", "B")       # how the two translators are named (A: the window's)

    def set_against(self, trace_b, model_b, names: tuple[str, str], show: bool) -> None:
        """B's trace of this stack (None: no B or no diff of this trace yet), the two
        translators' names and the window's switch."""
        changed = (trace_b is not self._against or show != self._show_difference)
        self._against, self._against_model, self._against_name = trace_b, model_b, names[1]
        self.pair_names = tuple(names)
        self._show_difference = bool(show)
        if changed:
            self._notify("shownTraceChanged")

    def against_ready(self) -> None:
        """B's layer detail came: the views waiting for it draw."""
        if self._show_difference:
            self._notify("shownTraceChanged")

    @property
    def show_difference(self) -> bool:
        return self._show_difference

    @property
    def against(self):
        trace_b = self._against
        if not self._show_difference or trace_b is None or self.trace is None:
            return None
        return trace_b if trace_b.is_ready(min(self.layer, trace_b.config.n_layer - 1)) else None

    @property
    def against_model(self):
        return None if self.against is None else self._against_model

    @property
    def against_name(self) -> str:
        return self._against_name

    @property
    def waiting_for_against(self) -> bool:
        return self._show_difference and self.trace is not None and self.against is None
