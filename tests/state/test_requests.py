"""Latest request wins, and the small callback event (state/requests.py, state/events.py)."""
import pytest

from transformer_stepper.state.events import Event, Events
from transformer_stepper.state.requests import Latest, Requests


def test_only_the_newest_request_of_a_kind_is_latest_and_kinds_do_not_interfere():
    requests = Requests()
    load, compute = Latest(requests), Latest(requests)
    first = load.new()
    other = compute.new()
    second = load.new()
    assert len({first, other, second}) == 3
    assert load.is_latest(second) and not load.is_latest(first)
    assert compute.is_latest(other), "a load does not make a compute stale"
    load.drop()
    assert not load.is_latest(second)


def test_an_event_calls_its_slots_in_order_and_forgets_a_disconnected_one():
    event, calls = Event(), []
    first = lambda x: calls.append(("first", x))          # noqa: E731
    event.connect(first)
    event.connect(lambda x: calls.append(("second", x)))
    event.emit(1)
    event.disconnect(first)
    event.emit(2)
    assert calls == [("first", 1), ("second", 1), ("second", 2)]
    with pytest.raises(TypeError):
        event.disconnect(first)


def test_events_are_made_on_first_use_and_notify_only_those_connected():
    events, calls = Events(), []
    events.notify("nobodyListens", 1)
    events.layerChanged.connect(calls.append)
    events.notify("layerChanged", 3)
    assert calls == [3] and events.layerChanged is events.layerChanged
