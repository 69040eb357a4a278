"""A training run as a Job, on the ManualScheduler (no Qt, no thread): frames arrive as the
news of progress reports, Stop (the job's cancel) ends the run at the frame boundary where it
was asked for with the history so far, and a run stopped before its first step is cancelled."""
from __future__ import annotations

import numpy as np
import pytest

from transformer_stepper.core.training import corpus
from transformer_stepper.core.training.recipe import QUICK
from transformer_stepper.state.scheduler import ManualScheduler
from transformer_stepper.state.training_job import Frame, Outcome, TrainingRun

TINY = QUICK.replace(steps=12, n_heldout=20, batch_size=4, d_model=16, d_ff=32, n_layer=1,
                     corpus=corpus.CorpusConfig(n_passages=60, max_episodes=1))


def start(run: TrainingRun, on_progress, log: dict) -> tuple[ManualScheduler, object]:
    scheduler = ManualScheduler()
    job = run.job(5)
    scheduler.start(job, lambda n, outcome: log["done"].append(outcome),
                    lambda n, message, user: log["failed"].append(message),
                    on_progress, lambda n: log["cancelled"].append(n))
    return scheduler, job


def new_log() -> dict:
    return {"done": [], "failed": [], "cancelled": [], "news": []}


def test_a_run_reports_each_frame_as_news_and_ends_trained():
    run, log = TrainingRun(TINY, frame_seconds=0.0), new_log()
    scheduler, job = start(run, lambda n, done, total, news: log["news"].append((done, total, news)), log)
    assert job.lane == "training"            # never on the lane tracing runs on
    scheduler.run_all()
    assert log["failed"] == [] and log["cancelled"] == []
    outcome = log["done"][0]
    assert isinstance(outcome, Outcome) and outcome.trained is not None
    texts = [news for _, _, news in log["news"] if isinstance(news, str)]
    frames = [(done, total, news) for done, total, news in log["news"] if isinstance(news, Frame)]
    assert texts == ["generating the corpus…", "training…"]
    assert [done for done, _, _ in frames] == list(range(1, TINY.steps + 1)) == [f.step for _, _, f in frames]
    assert all(total == TINY.steps for _, total, _ in frames) and run.frames_sent == TINY.steps
    last = frames[-1][2]
    assert np.array_equal(last.train_losses, np.asarray(outcome.history.losses, dtype=np.float32))
    # a frame holds copies: training on does not change what an earlier frame showed
    assert not np.array_equal(frames[0][2].table, last.table)


def test_frames_are_rate_limited_by_the_clock_and_the_last_step_always_reported():
    now = [0.0]

    def clock() -> float:
        now[0] += 0.125                      # every step 125 ms later (exact in binary)
        return now[0]

    run, log = TrainingRun(TINY, frame_seconds=0.5, clock=clock), new_log()
    scheduler, _ = start(run, lambda n, d, t, news: log["news"].append(news), log)
    scheduler.run_all()
    steps = [news.step for news in log["news"] if isinstance(news, Frame)]
    assert steps == [1, 5, 9, 12]            # the first, then every 4th (500 ms), then the last


@pytest.mark.parametrize("at_step", [1, 7])
def test_stop_at_a_frame_ends_the_run_at_that_frame_with_its_history(at_step):
    run, log = TrainingRun(TINY, frame_seconds=0.0), new_log()
    jobs = []

    def on_progress(n, done, total, news):
        log["news"].append(news)
        if isinstance(news, Frame) and news.step == at_step:
            jobs[0].cancel()                 # Stop pressed while this frame is shown

    scheduler, job = start(run, on_progress, log)
    jobs.append(job)
    scheduler.run_all()
    assert log["cancelled"] == [] and log["failed"] == []
    outcome = log["done"][0]
    assert outcome.trained is None           # nothing half-trained to save ...
    assert outcome.history.steps[-1] == at_step      # ... and no step after the frame
    assert [n.step for n in log["news"] if isinstance(n, Frame)][-1] == at_step
    assert run.control.stopped


def test_stop_before_the_first_step_cancels_the_job():
    run, log = TrainingRun(TINY, frame_seconds=0.0), new_log()
    jobs = []

    def on_progress(n, done, total, news):
        log["news"].append(news)
        jobs[0].cancel()                     # while the corpus is being generated

    scheduler, job = start(run, on_progress, log)
    jobs.append(job)
    scheduler.run_all()
    assert log["cancelled"] == [5] and log["done"] == [] and log["failed"] == []
    assert log["news"] == ["generating the corpus…"] and run.frames_sent == 0


def test_a_run_stopped_before_it_started_ends_at_its_first_report():
    run, log = TrainingRun(TINY, frame_seconds=0.0), new_log()
    scheduler, job = start(run, lambda *a: log["news"].append(a), log)
    job.cancel()
    assert scheduler.wait_for(job)           # the manual scheduler runs it now: cancelled at once
    assert log["cancelled"] == [5] and log["news"] == [] and scheduler.idle
