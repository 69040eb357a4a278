"""The frame scheduler: every piece of drawing the GUI thread does over several event-loop turns
(a redrawn view's figures repainting one per turn, Compare's figures one per turn, the next stage
built and painted ahead, every stage's view built while idle) goes through one queue, so the
window answers between any two pieces and what is on screen goes first.

A task is a key and a `piece()`: each turn the scheduler runs one piece of the first task in
priority order (NOW: what is on screen; AHEAD: what the user will see next; IDLE: what may be
needed some day), first come first served within a priority. A piece returns something true to
run again in a later turn, PAUSE to run again after the idle pause, and None/False when the
task is done (then its `on_done()` runs). Adding a task under a key already queued replaces the
stale one. IDLE tasks wait while `busy()` says the user or a worker is active, and look again
after the pause. `close()` drops everything, and the scheduler takes nothing more. An `eager`
task's next piece runs in the very next turn (a 0 ms timer: Compare's figures, which repaint
between two pieces anyway) rather than TURN_MS later.

The turns are the scheduler's single-shot timers (state/scheduler.py): QTimers in the app
(ui/frames.py), a ManualScheduler in tests, where nothing runs until the test says so."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Iterator, Optional

from .scheduler import Scheduler

NOW, AHEAD, IDLE = 0, 1, 2
PAUSE = "pause"                 # a piece's answer: more to do, after the idle pause
# a turn is a few ms, not 0: the events already waiting go first (the last piece's paint), and
# so do timers that fell due meanwhile (a 0 ms timer is due at once and would run before them)
TURN_MS = 4
IDLE_PAUSE_MS = 60              # idle work: the pause between two views, or to look again when busy


@dataclass(eq=False)
class FrameTask:
    key: Hashable
    piece: Callable[[], object]
    priority: int
    on_done: Optional[Callable[[], None]] = None
    resting: bool = False       # waits for the pause to end
    eager: bool = False         # its next piece in the next turn (0 ms), not TURN_MS later


def run_steps(steps: Iterator) -> Callable[[], bool]:
    """A piece that runs the next of `steps` (callables) each turn; False when none is left."""
    def piece() -> bool:
        step = next(steps, None)
        if step is None:
            return False
        step()
        return True
    return piece


def run_generator(generator: Iterator) -> Callable[[], object]:
    """A piece that runs `generator` to its next yield each turn (what it yields: True, or PAUSE)."""
    def piece() -> object:
        return next(generator, False)
    return piece


class FrameScheduler:
    def __init__(self, scheduler: Scheduler, busy: Optional[Callable[[], bool]] = None,
                 turn_ms: int = TURN_MS, pause_ms: int = IDLE_PAUSE_MS) -> None:
        self._busy = busy or (lambda: False)
        self._tasks: list[FrameTask] = []       # in priority order, first come first within one
        self._turn = scheduler.timer(turn_ms, self.run_turn)
        self._eager_turn = scheduler.timer(0, self.run_turn)
        self._pause = scheduler.timer(pause_ms, self._pause_over)
        self._closed = False
        self.pieces_run = 0                      # how many turns ran a piece (tests, benches)
        # called with (key, priority) before each piece runs (tests, benches)
        self.on_piece: Optional[Callable[[Hashable, int], None]] = None

    # -- the queue ----------------------------------------------------------------------------
    def add(self, key: Hashable, piece: Callable[[], object], priority: int = NOW, *,
            first: bool = False, rest: bool = False, eager: bool = False,
            on_done: Optional[Callable[[], None]] = None) -> None:
        """Queue `piece` under `key` (replacing a stale task of that key), after the tasks of
        its priority (`first`: before them); `rest`: start after the idle pause."""
        if self._closed:
            return
        self.cancel(key)
        task = FrameTask(key, piece, priority, on_done, resting=rest, eager=eager)
        if first:
            where = next((i for i, t in enumerate(self._tasks) if t.priority >= priority), len(self._tasks))
        else:
            where = next((i for i, t in enumerate(self._tasks) if t.priority > priority), len(self._tasks))
        self._tasks.insert(where, task)
        if rest:
            self._pause.start()                  # (again: the pause counts from now)
        self._wake()

    def ensure(self, key: Hashable, piece: Callable[[], object], priority: int = NOW) -> None:
        """Queue `piece` under `key` unless a task of that key is queued (it keeps its place)."""
        if not self.pending(key):
            self.add(key, piece, priority)

    def cancel(self, key: Hashable) -> bool:
        """Drop the task of `key`; False when there was none. Its on_done is not called."""
        for i, task in enumerate(self._tasks):
            if task.key == key:
                del self._tasks[i]
                self._wake()
                return True
        return False

    def pending(self, key: Optional[Hashable] = None) -> bool:
        """A task of `key` (any task, without a key) is queued."""
        return any(key is None or task.key == key for task in self._tasks)

    def keys(self) -> list:
        """The queued tasks' keys, in the order they would run (resting ones included)."""
        return [task.key for task in self._tasks]

    def close(self) -> None:
        """Drop every task and stop; nothing added later runs (window close)."""
        self._closed = True
        self._tasks.clear()
        for timer in (self._turn, self._eager_turn, self._pause):
            timer.stop()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the turns ------------------------------------------------------------------------------
    def run_turn(self) -> None:
        """One piece of the first task that may run now (the turn timer calls it)."""
        task = self._next_task()
        if task is not None:
            self.pieces_run += 1
            if self.on_piece is not None:
                self.on_piece(task.key, task.priority)
            try:
                outcome = task.piece()
            except BaseException:
                self._drop(task)                 # a broken piece is not run again every turn
                self._wake()
                raise
            if task in self._tasks:              # (not cancelled or replaced by its own piece)
                if outcome == PAUSE:
                    task.resting = True
                elif not outcome:
                    self._drop(task)
                    if task.on_done is not None:
                        task.on_done()
        self._wake()

    def _next_task(self) -> Optional[FrameTask]:
        busy: Optional[bool] = None
        for task in self._tasks:
            if task.resting:
                continue
            if task.priority >= IDLE:
                busy = self._busy() if busy is None else busy
                if busy:                         # idle work waits: look again after the pause
                    for idle in self._tasks:
                        idle.resting = idle.resting or idle.priority >= IDLE
                    continue
            return task
        return None

    def _drop(self, task: FrameTask) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    def _pause_over(self) -> None:
        for task in self._tasks:
            task.resting = False
        self._wake()

    def _wake(self) -> None:
        """The turn timer runs while a task may run (the 0 ms one when the first such task is
        eager); the pause timer while one rests."""
        runnable = next((task for task in self._tasks if not task.resting), None)
        timer = None if runnable is None else self._eager_turn if runnable.eager else self._turn
        for turn in (self._turn, self._eager_turn):
            if turn is not timer:
                turn.stop()
            elif not turn.isActive():
                turn.start()
        if any(task.resting for task in self._tasks):
            if not self._pause.isActive():
                self._pause.start()
        else:
            self._pause.stop()
