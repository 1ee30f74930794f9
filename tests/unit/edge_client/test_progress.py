"""The progress callback (issue 37): an event per shard fetched, decoded or computed, read from
the timeline the pipeline records; one at a time and none after the edit; a callback that raises
stops the edit with its own exception and leaves the session usable."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sakura.edge_client import COMPUTE, EdgeSession, Progress
from sakura.edge_client._progress import ProgressTeller
from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.platform.images import load_image
from tests.unit.edge_client.test_session import PHOTO, exact_output

SHARDS = 6


def edit_with_events(session: EdgeSession, policy: str) -> tuple[list[Progress], Timeline]:
    events: list[Progress] = []
    result = session.edit(load_image(PHOTO), "portrait", version=1, policy=policy, on_progress=events.append)
    return events, result.timeline


def test_every_fetched_shard_is_told_fetched_then_decoded_as_its_timeline_records_it(api, reference_model, tmp_path):
    with EdgeSession(api.url, cache_dir=tmp_path, models=lambda _: reference_model) as session:
        cold, cold_timeline = edit_with_events(session, "fixed-full")
        warm, warm_timeline = edit_with_events(session, "fixed-full")  # every shard kept from the first
    for events, timeline, source in ((cold, cold_timeline, "network"), (warm, warm_timeline, "cache")):
        assert sorted((e.shard, e.kind) for e in events) == [(i, k) for i in range(SHARDS)
                                                             for k in ("decoded", "fetched")]
        for event in events:
            timing = timeline.shards[event.shard]
            assert event.shards == SHARDS and event.level == timing.level == "full"
            assert event.source == timing.source == source and event.bytes == timing.bytes
        for i in range(SHARDS):
            fetched, decoded = (next(e for e in events if e.shard == i and e.kind == k) for k in ("fetched", "decoded"))
            timing = timeline.shards[i]
            assert events.index(fetched) < events.index(decoded)
            assert timing.arrived_at <= fetched.at <= timing.decode_started_at <= timing.decoded_at <= decoded.at
    assert all(e.bytes > 0 for e in cold) and all(e.bytes == 0 for e in warm)


def test_every_shard_the_phone_computes_is_told_computed(api, reference_model):
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        events, timeline = edit_with_events(session, "on-device")
    assert [(e.kind, e.shard, e.level, e.source) for e in events] == [
        ("computed", i, COMPUTE, "computed") for i in range(SHARDS)]
    assert all(timeline.shards[e.shard].consumed_at <= e.at for e in events)


class AppBug(Exception):
    """What the app's callback raises: not an error of the library's."""


@pytest.mark.parametrize("kind, policy", [("fetched", "fixed-full"), ("decoded", "fixed-full"),
                                          ("computed", "on-device")])
def test_a_callback_that_raises_stops_the_edit_with_its_exception_and_the_session_stays_usable(
        api, reference_model, tmp_path, kind, policy):
    """Raised on a download's thread, the decoder's, or the caller's own (a computed shard): the
    edit raises the app's exception, tells nothing more, and the next edit of the session (and
    its cache) gives the exact image."""
    told: list[Progress] = []

    def on_progress(event: Progress) -> None:
        told.append(event)
        if event.kind == kind:
            raise AppBug(f"{kind} {event.shard}")

    with EdgeSession(api.url, cache_dir=tmp_path, models=lambda _: reference_model) as session:
        with pytest.raises(AppBug):
            session.edit(load_image(PHOTO), "portrait", version=1, policy=policy, on_progress=on_progress)
        after = len(told)
        again = session.edit(load_image(PHOTO), "portrait", version=1, policy=policy)
    assert [e.kind for e in told].count(kind) == 1 and len(told) == after  # nothing told after it raised
    np.testing.assert_array_equal(again.image, exact_output(reference_model, "portrait", PHOTO))
    for thread in [t for t in threading.enumerate() if t.name.startswith("sakura-")]:
        thread.join(timeout=60)  # a hang guard, not a bound
    assert not [t for t in threading.enumerate() if t.name.startswith("sakura-")]


def teller(callback, stopped=lambda: False) -> ProgressTeller:
    timeline = Timeline("test", [ShardTiming(0, level="full", bytes=10), ShardTiming(1)])
    return ProgressTeller(callback, timeline, clock=lambda: 1.5, stopped=stopped)


def test_an_event_is_read_from_the_timeline_record():
    told: list[Progress] = []
    teller(told.append).tell("fetched", 0)
    assert told == [Progress("fetched", 0, 2, "full", "network", 10, 1.5)]


def test_nothing_is_told_once_the_edit_stopped_or_closed():
    told: list[Progress] = []
    stopped = teller(told.append, stopped=lambda: True)
    stopped.tell("decoded", 0)
    closed = teller(told.append)
    closed.close()
    closed.tell("decoded", 0)
    assert told == []


def test_close_waits_for_a_callback_under_way_and_events_come_one_at_a_time():
    entered, release = threading.Event(), threading.Event()
    inside, overlapped = [0], []

    def slow(event: Progress) -> None:
        inside[0] += 1
        overlapped.append(inside[0] > 1)
        if event.shard == 0:
            entered.set()
            release.wait(60)  # a hang guard
        inside[0] -= 1

    t = teller(slow)
    first = threading.Thread(target=t.tell, args=("fetched", 0))
    first.start()
    entered.wait(60)
    second = threading.Thread(target=t.tell, args=("fetched", 1))
    closing = threading.Thread(target=t.close)
    second.start()
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # held by the callback under way (a close that did not wait is done by now)
    release.set()
    for thread in (first, second, closing):
        thread.join(60)
    assert overlapped == [False] * len(overlapped)


def test_after_a_callback_raised_nothing_more_is_told():
    told: list[Progress] = []

    def fails(event: Progress) -> None:
        told.append(event)
        raise AppBug("once")

    t = teller(fails)
    with pytest.raises(AppBug):
        t.tell("fetched", 0)
    t.tell("fetched", 1)  # another stage's, before the pipeline has stopped
    assert [e.shard for e in told] == [0]
