"""Anonymous resident memory (RssAnon: not the file pages of memory-mapped weights) of this
process, now and at its peak over a block of code (sampled every 5 ms in a thread)."""
from __future__ import annotations

import threading
from contextlib import contextmanager


def rss_anon() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


@contextmanager
def peak_rss_anon():
    """with peak_rss_anon() as peak: ...; then peak() is the largest RssAnon seen, in bytes."""
    samples = [rss_anon()]
    done = threading.Event()

    def sample():
        while not done.wait(0.005):
            samples.append(rss_anon())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield lambda: max(samples)
    finally:
        done.set()
        thread.join()
        samples.append(rss_anon())
