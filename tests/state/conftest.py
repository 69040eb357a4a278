"""State fixtures: tiny models on disk and a SessionModel on a ManualScheduler, no QApplication."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper.state.scheduler import ManualScheduler
from transformer_stepper.state.session import SessionModel

DEBOUNCE_MS = 15


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("state_models")
    return {kind: write_npz_model(folder / f"{kind}.npz", tiny_config(kind).replace(name=f"tiny-{kind}"),
                                  random_params(tiny_config(kind), seed=1), tokenizer_for(kind))
            for kind in ("bert", "gpt2")}


@pytest.fixture
def scheduler() -> ManualScheduler:
    return ManualScheduler()


@pytest.fixture
def session(scheduler) -> SessionModel:
    return SessionModel(scheduler, debounce_ms=DEBOUNCE_MS)


def heard(session, *names):
    """-> a list that collects (name, model, trace, args) for each notification named."""
    log = []
    for name in names:
        getattr(session.events, name).connect(
            lambda *args, name=name: log.append((name, session.model, session.trace, args)))
    return log


def opened(session, scheduler, path, text="the bank of the river"):
    session.set_text(text, immediate=True)       # no model yet: nothing to trace
    session.open_model(str(path))
    scheduler.run_all()
    assert session.trace is not None and session.trace.text == text
    return session
