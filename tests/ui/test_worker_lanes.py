"""One worker pool, lanes of threads: a long job in a lane of its own (training, an export's
writes) never holds back the default lane (tracing); a job's news reaches the GUI thread with
its progress; wait_for waits for one job, not the pool."""
import threading

from transformer_stepper.state.scheduler import Job
from transformer_stepper.ui.workers import WorkerPool


def test_a_long_job_in_its_lane_leaves_the_default_lane_free(qtbot):
    pool = WorkerPool(max_threads=1)
    release = threading.Event()
    log = []

    def long_run(progress):
        progress(0, 2, "started")
        release.wait(10)
        progress(1, 2, {"frame": 1})
        return "trained"

    long_job = Job(1, long_run, reports=True, lane="training")
    queued = Job(2, lambda: "second run", lane="training")
    pool.start(long_job, lambda n, r: log.append(("done", n, r)), lambda *a: log.append(a),
               lambda n, d, t, news=None: log.append(("news", n, d, t, news)))
    pool.start(queued, lambda n, r: log.append(("done", n, r)), lambda *a: log.append(a))
    qtbot.waitUntil(lambda: ("news", 1, 0, 2, "started") in log, timeout=10_000)
    pool.start(Job(3, lambda: "traced"), lambda n, r: log.append(("done", n, r)), lambda *a: log.append(a))
    qtbot.waitUntil(lambda: ("done", 3, "traced") in log, timeout=10_000)   # beside the long job
    assert not long_job.ended.is_set() and not queued.ended.is_set()      # one thread in its lane
    assert not pool.idle
    release.set()
    assert pool.wait_for(long_job, 10_000)
    qtbot.waitUntil(lambda: ("done", 2, "second run") in log, timeout=10_000)
    assert ("news", 1, 1, 2, {"frame": 1}) in log and ("done", 1, "trained") in log
    assert pool.wait(10_000)
    qtbot.waitUntil(lambda: pool.idle, timeout=10_000)


def test_a_cancel_tells_the_job_and_a_job_cancelled_in_the_queue_stops_at_its_first_report(qtbot):
    pool = WorkerPool(max_threads=1)
    release, told, ran, ended = threading.Event(), [], [], []

    def blocking(progress):
        release.wait(10)
        progress(1, 1)

    first = Job(1, blocking, reports=True, on_cancel=lambda: told.append(1))
    def reporting(progress):
        progress(0, 1)
        ran.append(2)

    second = Job(2, reporting, reports=True)
    for job in (first, second):
        pool.start(job, lambda *a: ended.append(("done", a[0])), lambda *a: ended.append(a),
                   None, lambda n: ended.append(("cancelled", n)))
    second.cancel()
    first.cancel()
    assert told == [1]
    release.set()
    qtbot.waitUntil(lambda: len(ended) == 2, timeout=10_000)
    assert sorted(ended) == [("cancelled", 1), ("cancelled", 2)] and ran == []
    assert pool.wait(10_000)
