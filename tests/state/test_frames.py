"""The frame scheduler's policy (state/frames.py) on a ManualScheduler: nothing runs until the
test moves the clock, so each turn and what ran in it is checked."""
import pytest

from transformer_stepper.state.frames import (AHEAD, IDLE, IDLE_PAUSE_MS, NOW, PAUSE, TURN_MS,
                                              FrameScheduler, run_generator, run_steps)
from transformer_stepper.state.scheduler import ManualScheduler


@pytest.fixture
def manual() -> ManualScheduler:
    return ManualScheduler()


def recorder(log: list, name: str, pieces: int, pause_after: tuple = ()):
    """A piece that notes (name, piece number) each turn; `pieces` of them, PAUSE after those
    numbered in `pause_after`."""
    count = [0]

    def piece():
        count[0] += 1
        log.append((name, count[0]))
        if count[0] >= pieces:
            return False
        return PAUSE if count[0] in pause_after else True
    return piece


def turns(manual: ManualScheduler, n: int) -> None:
    for _ in range(n):
        manual.advance(TURN_MS)


def test_one_piece_per_turn_in_priority_order_first_come_first_within_one(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("idle", recorder(log, "idle", 2), IDLE)
    frames.add("ahead", recorder(log, "ahead", 2), AHEAD)
    frames.add("now a", recorder(log, "now a", 2), NOW)
    frames.add("now b", recorder(log, "now b", 1), NOW)
    assert frames.keys() == ["now a", "now b", "ahead", "idle"]
    assert not log, "nothing runs in the turn that queued it"
    manual.advance(TURN_MS - 1)
    assert not log
    manual.advance(1)
    assert log == [("now a", 1)]
    turns(manual, 6)
    assert log == [("now a", 1), ("now a", 2), ("now b", 1), ("ahead", 1), ("ahead", 2),
                   ("idle", 1), ("idle", 2)]
    assert not frames.pending() and frames.pieces_run == 7
    turns(manual, 3)
    assert len(log) == 7


def test_work_on_screen_added_later_goes_before_work_ahead_already_started(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("ahead", recorder(log, "ahead", 3), AHEAD)
    turns(manual, 1)
    frames.add("now", recorder(log, "now", 2), NOW)
    turns(manual, 4)
    assert log == [("ahead", 1), ("now", 1), ("now", 2), ("ahead", 2), ("ahead", 3)]


def test_first_puts_a_task_before_the_others_of_its_priority_only(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("figures", recorder(log, "figures", 2), NOW)
    frames.add("explanation", recorder(log, "explanation", 1), NOW, first=True)
    frames.add("urgent ahead", recorder(log, "urgent ahead", 1), AHEAD, first=True)
    assert frames.keys() == ["explanation", "figures", "urgent ahead"]


def test_a_task_added_again_under_its_key_replaces_the_stale_one(manual):
    frames, log, done = FrameScheduler(manual), [], []
    frames.add("draw", recorder(log, "old", 5), NOW, on_done=lambda: done.append("old"))
    frames.add("other", recorder(log, "other", 1), NOW)
    turns(manual, 1)
    frames.add("draw", recorder(log, "new", 2), NOW, on_done=lambda: done.append("new"))
    assert frames.keys() == ["other", "draw"], "the new task queues behind the others"
    turns(manual, 5)
    assert log == [("old", 1), ("other", 1), ("new", 1), ("new", 2)]
    assert done == ["new"], "the stale task neither runs on nor reports done"


def test_ensure_keeps_a_queued_task_in_its_place(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("a", recorder(log, "a", 2), NOW)
    frames.add("b", recorder(log, "b", 1), NOW)
    turns(manual, 1)
    frames.ensure("a", recorder(log, "replacement", 1), NOW)
    turns(manual, 3)
    assert log == [("a", 1), ("a", 2), ("b", 1)], "a task runs to its end before the next"


def test_idle_work_waits_while_busy_and_looks_again_after_the_pause(manual):
    busy = [True]
    frames, log = FrameScheduler(manual, busy=lambda: busy[0]), []
    frames.add("idle", recorder(log, "idle", 3), IDLE)
    frames.add("now", recorder(log, "now", 1), NOW)
    turns(manual, 3)
    assert log == [("now", 1)], "work on screen runs while busy; idle work does not"
    assert frames.pending("idle")
    busy[0] = False
    turns(manual, 3)                                      # still in the pause
    assert log == [("now", 1)]
    manual.advance(IDLE_PAUSE_MS)
    turns(manual, 1)
    assert log == [("now", 1), ("idle", 1)]
    busy[0] = True
    turns(manual, 2)
    assert log == [("now", 1), ("idle", 1)], "busy again mid-task: the next piece waits"
    busy[0] = False
    manual.advance(IDLE_PAUSE_MS)
    turns(manual, 3)
    assert log == [("now", 1), ("idle", 1), ("idle", 2), ("idle", 3)]
    assert not frames.pending()


def test_busy_is_not_asked_while_only_work_on_screen_waits(manual):
    asked = []
    frames, log = FrameScheduler(manual, busy=lambda: asked.append(1) or False), []
    frames.add("now", recorder(log, "now", 3), NOW)
    turns(manual, 3)
    assert log == [("now", 1), ("now", 2), ("now", 3)] and not asked


def test_a_piece_answering_pause_runs_again_after_the_pause_and_others_go_meanwhile(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("views", recorder(log, "views", 3, pause_after=(1,)), IDLE)
    turns(manual, 1)
    frames.add("figures", recorder(log, "figures", 2), NOW)
    turns(manual, 4)
    assert log == [("views", 1), ("figures", 1), ("figures", 2)]
    manual.advance(IDLE_PAUSE_MS)
    turns(manual, 3)
    assert log[3:] == [("views", 2), ("views", 3)]


def test_rest_starts_a_task_after_the_pause_counted_from_the_last_add(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("idle", recorder(log, "idle", 1), IDLE, rest=True)
    manual.advance(IDLE_PAUSE_MS - 10)
    frames.add("idle", recorder(log, "idle again", 1), IDLE, rest=True)    # a new trace
    manual.advance(20)
    turns(manual, 2)
    assert not log, "the pause starts again with the new task"
    manual.advance(IDLE_PAUSE_MS)
    turns(manual, 1)
    assert log == [("idle again", 1)]


def test_cancel_and_close_drop_tasks_without_running_or_reporting_them(manual):
    frames, log, done = FrameScheduler(manual), [], []
    frames.add("a", recorder(log, "a", 3), NOW, on_done=lambda: done.append("a"))
    frames.add("b", recorder(log, "b", 3), AHEAD)
    frames.add("c", recorder(log, "c", 3), IDLE, rest=True)
    turns(manual, 1)
    assert frames.cancel("a") and not frames.cancel("a")
    turns(manual, 1)
    frames.close()
    frames.add("d", recorder(log, "d", 1), NOW)             # a late trace after window close
    manual.advance(10 * IDLE_PAUSE_MS)
    assert log == [("a", 1), ("b", 1)] and not done
    assert not frames.pending() and frames.closed
    assert not any(timer.isActive() for timer in manual.timers), "no timer left running"


def test_a_piece_may_cancel_or_replace_its_own_task(manual):
    frames, log = FrameScheduler(manual), []

    def restart():
        log.append("restart")
        frames.add("draw", recorder(log, "newer", 1), NOW)
        return True                       # (the stale task's answer counts for nothing)

    frames.add("draw", restart, NOW)
    turns(manual, 3)
    assert log == ["restart", ("newer", 1)] and not frames.pending()


def test_a_piece_that_raises_is_dropped_and_the_others_go_on(manual):
    frames, log = FrameScheduler(manual), []

    def broken():
        raise RuntimeError("a bug in a drawing")

    frames.add("broken", broken, NOW)
    frames.add("fine", recorder(log, "fine", 1), NOW)
    with pytest.raises(RuntimeError):
        manual.advance(TURN_MS)
    assert frames.keys() == ["fine"]
    assert any(timer.isActive() for timer in manual.timers), "the next turn is still due"
    turns(manual, 1)
    assert log == [("fine", 1)]


def test_steps_and_generators_as_pieces(manual):
    frames, log, done = FrameScheduler(manual), [], []
    frames.add("steps", run_steps(iter([lambda: log.append(1), lambda: log.append(2)])), NOW,
               on_done=lambda: done.append(len(log)))

    def generator():
        log.append("built")
        yield PAUSE
        log.append("painted")
        yield True

    frames.add("generator", run_generator(generator()), AHEAD)
    turns(manual, 3)
    assert log == [1, 2] and done == [2], "done in the turn after the last step"
    turns(manual, 1)
    assert log == [1, 2, "built"]
    turns(manual, 2)
    assert log == [1, 2, "built"]
    manual.advance(IDLE_PAUSE_MS)
    turns(manual, 2)
    assert log == [1, 2, "built", "painted"] and not frames.pending()


def test_an_eager_tasks_pieces_run_in_the_next_turn_and_others_keep_theirs(manual):
    frames, log = FrameScheduler(manual), []
    frames.add("compare", recorder(log, "compare", 3), NOW, eager=True)
    frames.add("figures", recorder(log, "figures", 2), NOW)
    manual.advance(0)
    manual.advance(0)
    assert log == [("compare", 1), ("compare", 2)], "a 0 ms turn each"
    manual.advance(0)
    assert log[-1] == ("compare", 3)
    manual.advance(0)
    manual.advance(TURN_MS - 1)
    assert len(log) == 3, "the next task's turns are TURN_MS apart again"
    manual.advance(1)
    assert log[-1] == ("figures", 1)
    frames.close()
    assert not any(timer.isActive() for timer in manual.timers)
