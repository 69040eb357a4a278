"""The guided walks' requests without Qt (state/walks.py on a ManualScheduler, the built-in
model): a step's numbers land as the state its caption quotes; only the latest step wanted is
applied, whatever order the results land in; ending a walk drops its step in flight; the user's
state is given back when the walk ends with a restore (the list, the dock closed), not when it
is left here, and never twice; a failure is told only for the latest step; a new model computes
the same step again."""
from __future__ import annotations

import pytest

from tests.state.conftest import opened
from transformer_stepper.core.analysis.walks import fill_step
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.interventions import AblateHead
from transformer_stepper.io.resources import builtin_model_dir
from transformer_stepper.io.walks import load_walks, walk_extras
from transformer_stepper.state import walks as walks_state
from transformer_stepper.state.session import DEFAULT_TEXT
from transformer_stepper.state.walks import COMPUTING, UserState, WalkModel

WALKS = load_walks()
KEYS = [w.key for w in WALKS]
WEIGHTED_SUM = KEYS.index("05-weighted-sum-keeps-sources")
UNSEEN = KEYS.index("06-unseen-sentence")
MINE = "the king saw the river"


def heard(walking, name):
    log = []
    getattr(walking.events, name).connect(lambda *args: log.append(args))
    return log


@pytest.fixture
def builtin(session, scheduler):
    path = builtin_model_dir()
    if not (path / "config.json").is_file():
        pytest.skip(f"the built-in model is not there yet ({path})")
    return opened(session, scheduler, path, MINE)


@pytest.fixture
def walking(session) -> WalkModel:
    return WalkModel(session, WALKS, walk_extras)


def test_a_step_lands_as_the_state_its_caption_quotes(builtin, scheduler, walking):
    changed, applied = heard(walking, "changed"), heard(walking, "apply")
    assert walking.start(WEIGHTED_SUM, "stepper")
    assert walking.caption == COMPUTING and len(changed) == 1 and applied == []
    assert len(scheduler.jobs) == 1
    scheduler.run_all()
    assert len(applied) == 1 and len(changed) == 2
    shown = applied[0][0]
    assert shown is walking.shown and (shown.walk, shown.index) == (WALKS[WEIGHTED_SUM], 0)
    expected = fill_step(builtin.model, WALKS[WEIGHTED_SUM], 0, DEFAULT_TEXT, walk_extras())
    assert walking.caption == expected.caption and shown.state == expected.state
    assert not walking.can_go_back and walking.can_go_on


def test_only_the_latest_step_is_applied_whatever_order_the_results_land_in(builtin, scheduler, walking):
    applied = heard(walking, "apply")
    walking.start(WEIGHTED_SUM, "stepper")
    walking.next()
    walking.next()
    assert walking.index == 2 and len(scheduler.jobs) == 3
    scheduler.run_next(2)                       # the latest lands first
    scheduler.run_all()                         # then the two older ones
    assert [args[0].index for args in applied] == [2]
    assert walking.shown.index == 2 and walking.caption == walking.shown.caption
    walking.back()
    scheduler.run_all()
    assert [args[0].index for args in applied] == [2, 1] and walking.index == 1


def test_ending_a_walk_drops_its_step_in_flight(builtin, scheduler, walking):
    applied, changed = heard(walking, "apply"), heard(walking, "changed")
    walking.start(WEIGHTED_SUM, "stepper")
    walking.end(restore=False)
    assert walking.walk is None
    scheduler.run_all()
    assert applied == [] and len(changed) == 1 and walking.shown is None
    walking.go(1)                               # an ended walk sets nothing again
    walking.refresh()                           # (a model opened afterwards)
    assert scheduler.idle


def test_a_step_of_the_walk_before_is_dropped(builtin, scheduler, walking):
    applied = heard(walking, "apply")
    walking.start(WEIGHTED_SUM, "stepper")
    walking.start(UNSEEN, "stepper")
    scheduler.run_all()
    assert [(args[0].walk.key, args[0].index) for args in applied] == [(KEYS[UNSEEN], 0)]


def test_the_user_state_is_kept_when_the_walk_begins_and_given_back_once(builtin, scheduler, walking):
    session = builtin
    session.set_stage("embedding")
    session.select_token(2)
    session.set_interventions((AblateHead(1, 0),))
    scheduler.run_all()
    mine = UserState(MINE, "compare", "embedding", 0, 0, 2, session.temperature, (AblateHead(1, 0),))
    assert UserState.of(session, "compare") == mine
    restored = heard(walking, "restore")
    walking.start(WEIGHTED_SUM, "compare")
    scheduler.run_all()
    walking.start(UNSEEN, "stepper")            # another walk: the user's state is still the one kept
    assert walking.before == mine
    walking.end(restore=True)                   # the list, or the dock closed
    assert restored == [(mine,)] and walking.before is None
    walking.end(restore=True)
    assert len(restored) == 1, "given back once"


def test_leaving_the_walk_here_gives_nothing_back(builtin, scheduler, walking):
    restored = heard(walking, "restore")
    walking.start(UNSEEN, "stepper")
    scheduler.run_all()
    walking.end(restore=False)
    walking.end(restore=True)
    assert restored == [] and walking.before is None
    walking.start(UNSEEN, "stepper")            # a new walk keeps the state the last one left
    assert walking.before == UserState.of(builtin, "stepper")


def test_without_a_model_nothing_runs_and_nothing_is_given_back(session, scheduler, walking):
    restored = heard(walking, "restore")
    walking.start(UNSEEN, "stepper")
    assert scheduler.idle and walking.before is not None
    walking.end(restore=True)
    assert restored == []


def test_a_failure_is_told_only_for_the_latest_step(builtin, scheduler, walking, monkeypatch):
    def failing(model, walk, index, *rest):
        if index == 1:
            raise ModelError("no such readout")
        return fill_step(model, walk, index, *rest)

    monkeypatch.setattr(walks_state, "fill_step", failing)
    walking.start(WEIGHTED_SUM, "stepper")
    scheduler.run_all()
    walking.next()                              # fails, but step 2 is wanted by then
    walking.next()
    scheduler.run_next()
    assert walking.caption == walks_state.COMPUTING
    scheduler.run_all()
    assert walking.caption == walking.shown.caption and walking.shown.index == 2
    walking.back()
    scheduler.run_all()
    assert walking.caption == "⚠ This step could not be computed on this model: no such readout"
    assert walking.shown.index == 2, "the failed step applied nothing"


def test_a_new_model_computes_the_same_step_again(builtin, scheduler, walking):
    applied = heard(walking, "apply")
    walking.start(UNSEEN, "stepper")
    scheduler.run_all()
    walking.next()                              # in flight on the model open now
    first = builtin.model
    builtin.open_model(str(builtin_model_dir()))
    scheduler.run_next(1)                       # the new model lands first
    assert builtin.model is not first
    walking.refresh()
    job = scheduler.jobs[-1][0]
    assert job.args[0] is builtin.model and job.args[2] == 1
    scheduler.run_all()                         # the old model's step lands too late
    assert [args[0].index for args in applied] == [0, 1]
