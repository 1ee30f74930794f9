"""While the model waits for a download, the phone runs the template pass on towards the shard, and
starts a pass fetched whole so far where the rest of it is due later than computing it all (the
live compute stage's side of :func:`~sakura.edge_client.late_download.climbs`; the simulator's
replay of it on a trace is in ``tests/unit/evaluation/test_one_pass_hybrid.py``).

The compute stage runs against a scripted pipeline on a virtual clock: each template block moves
the clock on by what the phone was told a block costs, and the download the model waits for is
due at a set time, so no judgement here depends on this machine's speed. The download is handed
over by another thread once the phone has climbed as far as the test expects (or at once)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

from sakura.edge_client._progress import ProgressTeller
from sakura.edge_client._streaming_kv import StreamingKV
from sakura.edge_client._template_kv import TemplateComputer
from sakura.edge_client.device import Device
from sakura.edge_client.late_download import Due, climbs
from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.platform.kv import KVPair, ShardKey
from tests.unit.edge_client._told_costs import ToldCosts

BLOCKS = 6
BLOCK_S = 1.0  # what the phone is told (and the virtual clock charges) for a block of the pass
KEYS = [ShardKey(None, layer) for layer in range(BLOCKS)]
GUARD_S = 30.0  # the most a test thread waits for the compute stage: never reached while it works


def _pair(value: float) -> KVPair:
    return KVPair(np.full((1, 2, 2), value, np.float32), np.zeros((1, 2, 2), np.float32))


class Scripted:
    """The pipeline around the compute stage: block 0 left to the phone (none with ``phone_first``
    False), the rest fetched; the download of ``waited`` is expected decoded at ``due_at`` on the
    virtual clock, no sooner than ``soonest`` (by default the same), and the rest of the pass at
    ``pass_end`` (by default the same); ``poll_s``: how far the clock moves each time the compute
    stage judges the download while the model waits; ``prepare_s``: the source's preparation, which
    the first block of the pass carries."""

    def __init__(self, waited: int, due_at: float, soonest: float | None = None, poll_s: float = 0.0, *,
                 pass_end: float | None = None, phone_first: bool = True, prepare_s: float = 0.0) -> None:
        self.now, self.poll_s = 0.0, poll_s
        self.soonest = due_at if soonest is None else soonest
        self.pass_end = due_at if pass_end is None else pass_end
        self.phone_first, self.prepare_s = phone_first, prepare_s
        self.clock = lambda: self.now
        self.waited, self.due_at = waited, due_at
        self.started: list[float] = []  # when each template block began, on the virtual clock
        self.ran: list[int] = []  # the template blocks the phone computed, in order
        self.superseded: list[int] = []
        self.manifest = SimpleNamespace(model=SimpleNamespace(fingerprint="m"), tokens=SimpleNamespace(template=4),
                                        shards=[SimpleNamespace(key=key) for key in KEYS])
        self.timeline = Timeline("scripted", [ShardTiming(i) for i in range(BLOCKS)])
        self.cancel = threading.Event()
        self.compute_model, self.device, self.model = ToldCosts([BLOCK_S] * BLOCKS), Device(), "m"
        self.progress = ProgressTeller(None, self.timeline, self.clock, self.stopped)
        self.template = TemplateComputer(self._pass, KEYS, self.compute_model, "m", pace=self._paced,
                                         prepare_s=prepare_s)
        self.error = None

    def _pass(self, step: int | None) -> Iterator[tuple[ShardKey, KVPair]]:
        self.started.append(self.now)
        self.now += self.prepare_s
        for layer, key in enumerate(KEYS):
            self.ran.append(layer)
            yield key, _pair(-1.0)
            self.started.append(self.now)

    def _paced(self, _seconds: float) -> None:
        self.now += BLOCK_S

    def stopped(self) -> bool:
        return False

    def planned_compute(self, index: int) -> bool:
        return index == 0 and self.phone_first

    def fetch_due(self, index: int, waiting_since: float) -> Due:
        assert index == self.waited
        self.now += self.poll_s  # the compute stage asks once a poll while the model waits
        return Due(self.due_at, self.soonest, self.pass_end)

    def supersede(self, index: int) -> None:
        self.superseded.append(index)


def _edit_to(p: Scripted, kv: StreamingKV, *, hand_over_when: int) -> tuple[KVPair, float]:
    """The model reads block 0 (the phone's), the fetched blocks up to ``p.waited`` (ready), then
    waits for that one, which another thread hands over once the phone's frontier reached
    ``hand_over_when``, the clock then set to its due time. Returns what the model got, and when."""
    for index in range(1, p.waited):
        kv.offer(index, _pair(index))

    def download() -> None:
        for _ in range(int(GUARD_S / 0.01)):
            if p.template.frontier >= hand_over_when:
                break
            threading.Event().wait(0.01)
        p.now = max(p.now, p.due_at)
        kv.offer(p.waited, _pair(p.waited))

    assert kv[KEYS[0]] is not None and p.ran == [0]
    for index in range(1, p.waited):
        assert float(kv[KEYS[index]].k.flat[0]) == index  # fetched: the phone ran nothing for it
    handing = threading.Thread(target=download, daemon=True)
    handing.start()
    got = kv[KEYS[p.waited]]
    handing.join(GUARD_S)
    return got, p.now


def test_the_phone_runs_its_pass_on_while_the_download_is_due_after_the_next_block():
    """Block 0 computed, 1-3 fetched and taken: the model waits for 4 at t=1, its download due at
    t=3.5. Blocks 1 and 2 each end before it is due (t=2, t=3), so the phone runs them (block 3
    would end at 4: it waits). The download comes and the model takes it: the fetched KV, not a
    computed one, and the phone's frontier is one block below it, not four."""
    p = Scripted(waited=4, due_at=3.5)
    kv = StreamingKV(p, max_ahead=BLOCKS)
    got, at = _edit_to(p, kv, hand_over_when=3)
    assert float(got.k.flat[0]) == 4 and not kv.computed(4) and p.superseded == [0]
    assert p.ran == [0, 1, 2] and p.template.frontier == 3
    assert at == pytest.approx(3.5)


def test_a_download_due_before_the_next_block_would_end_is_waited_for():
    """The same edit, the download due at t=1.5: block 1 would end at 2, so the phone runs nothing."""
    p = Scripted(waited=4, due_at=1.5)
    kv = StreamingKV(p, max_ahead=BLOCKS)
    got, _ = _edit_to(p, kv, hand_over_when=1)
    assert float(got.k.flat[0]) == 4 and p.ran == [0] and p.template.frontier == 1


def test_having_climbed_to_the_shard_the_phone_computes_it_sooner_than_from_where_it_was():
    """The model waits for 4 from t=1; its download is expected at t=9, though it might come at 4.5.
    Blocks 1-3 each end before t=9, so the phone runs them (to t=4). Computing 4 from there takes a
    block, and the download was judged later: the phone computes it once it has waited half a
    block, at once, ending at t=5, and the download is stopped. Judged from where it was (blocks
    1-4, four), the rule would wait two blocks before computing them: t=7."""
    p = Scripted(waited=4, due_at=9.0, soonest=4.5, poll_s=0.05)
    kv = StreamingKV(p, max_ahead=BLOCKS)
    kv[KEYS[0]]
    for index in range(1, 4):
        kv.offer(index, _pair(index))
        kv[KEYS[index]]
    got = kv[KEYS[4]]
    assert float(got.k.flat[0]) == -1.0 and kv.computed(4) and 4 in p.superseded
    assert p.ran == [0, 1, 2, 3, 4] and p.now == pytest.approx(5.0, abs=0.25)


def _wait_in_a_pass_not_begun(p: Scripted, kv: StreamingKV) -> KVPair:
    """The model takes fetched blocks 0 to ``p.waited - 1``, then waits for ``p.waited`` from t=0; its
    download is handed over once the clock reaches ``p.due_at`` (the phone's polls move it on)."""
    for index in range(p.waited):
        kv.offer(index, _pair(index))
        assert float(kv[KEYS[index]].k.flat[0]) == index

    def download() -> None:
        for _ in range(int(GUARD_S / 0.01)):
            if p.now >= p.due_at or kv.computed(p.waited):
                break
            threading.Event().wait(0.01)
        kv.offer(p.waited, _pair(p.waited))

    handing = threading.Thread(target=download, daemon=True)
    handing.start()
    got = kv[KEYS[p.waited]]
    handing.join(GUARD_S)
    return got


def test_a_pass_fetched_whole_is_started_where_its_rest_is_due_later_than_computing_it_all():
    """Nothing left to the phone: blocks 0 and 1 fetched and taken, the model waits for 2 from t=0,
    its download expected at t=9 (though it might come at 0.1) and the rest of the pass (blocks
    2-5) at t=20, later than the whole pass computed (six blocks and the source's preparation,
    6.5 s). The phone starts the pass once
    the model has waited half its first block and the preparation (0.75 s), runs blocks 0 and 1,
    and then computes 2 itself rather than wait for a download due at 9."""
    p = Scripted(waited=2, due_at=9.0, soonest=0.1, poll_s=0.05, pass_end=20.0, phone_first=False, prepare_s=0.5)
    kv = StreamingKV(p, max_ahead=BLOCKS)
    got = _wait_in_a_pass_not_begun(p, kv)
    assert float(got.k.flat[0]) == -1.0 and kv.computed(2) and p.ran == [0, 1, 2]
    assert p.started[0] == pytest.approx(0.75, abs=0.06)  # not before it had waited that long
    assert p.now == pytest.approx(0.75 + 0.5 + 3 * BLOCK_S, abs=0.25)


def test_a_pass_whose_rest_is_due_sooner_than_computing_it_all_is_not_started():
    """The same wait, the rest of the pass due at t=5 (sooner than computing it all, 6.5 s): the phone
    runs nothing, though the download waited for ends after the next block would; the model takes
    the fetched KV at t=2.5."""
    p = Scripted(waited=2, due_at=2.5, poll_s=0.25, pass_end=5.0, phone_first=False, prepare_s=0.5)
    kv = StreamingKV(p, max_ahead=BLOCKS)
    got = _wait_in_a_pass_not_begun(p, kv)
    assert float(got.k.flat[0]) == 2 and not kv.computed(2) and p.ran == []


def test_the_rule_is_the_block_ending_no_later_than_the_download():
    due = Due(expected=5.0, soonest=4.0, pass_end=5.0)
    assert climbs(due, 3.0, block_s=2.0) and not climbs(due, 3.0, block_s=2.01)


def test_a_pass_not_begun_starts_on_the_rest_of_the_pass_and_after_half_its_first_block():
    """A pass not begun commits to its first block (``block_s``): it starts only where the rest of the
    pass is due no sooner than computing it all, and once the model has waited half that block."""
    due = Due(expected=10.0, soonest=4.0, pass_end=20.0)
    assert climbs(due, 3.0, block_s=2.0, begun=False, waited=1.0, pass_s=17.0)
    assert not climbs(due, 3.0, block_s=2.0, begun=False, waited=1.0, pass_s=17.01)  # the rest comes sooner
    assert not climbs(due, 3.0, block_s=2.0, begun=False, waited=0.99, pass_s=17.0)  # not waited long enough
    assert not climbs(Due(4.99, 4.0, 20.0), 3.0, block_s=2.0, begun=False, waited=1.0, pass_s=1.0)
