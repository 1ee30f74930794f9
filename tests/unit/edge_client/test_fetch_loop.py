"""The fetch stage's decisions (:class:`~sakura.edge_client.fetch_loop.FetchLoop`) on a scripted
driver: no clock, no thread, no link; each test scripts what the policy says and when downloads
finish, and checks what the loop asked for and in which order."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sakura.edge_client.fetch_loop import FETCH, FetchLoop
from sakura.edge_client.planning import COMPUTE


@dataclass
class Script:
    """A driver that records every action; ``computes``: shards the policy leaves to the phone;
    ``take_back``: levels the policy takes back, top first; ``reached``: shards the model asked for."""

    computes: set[int] = field(default_factory=set)
    take_backs: list[str | None] = field(default_factory=list)
    reached: set[int] = field(default_factory=set)
    phone_computed: set[int] = field(default_factory=set)
    log: list[tuple] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    done: set[int] = field(default_factory=set)  # downloads complete
    #: downloads that complete while the loop waits for a later one to near its end
    complete_while_waiting: set[int] = field(default_factory=set)
    #: how many times the phone says it has not timed a block yet (a fresh phone)
    untimed: int = 0

    def stopped(self) -> bool:
        return False

    def computed(self, index: int) -> bool:
        return index in self.phone_computed

    def await_template_cost(self) -> None:
        self.log.append(("await",))
        self.untimed = 0

    def await_model(self, index: int) -> None:
        self.log.append(("model at", index))
        self.reached.update(range(index + 1))

    def template_timed(self, near: int | None) -> bool:
        self.log.append(("timed?", near))
        self.untimed -= 1
        return self.untimed < 0

    def choose(self, index: int, *, can_compute: bool) -> str:
        self.log.append(("choose", index, can_compute))
        return COMPUTE if can_compute and index in self.computes else "medium"

    def take_back(self, first: int, top: int) -> str | None:
        self.log.append(("take_back?", first, top))
        return self.take_backs.pop(0) if self.take_backs else None

    def leave_to_phone(self, index: int) -> None:
        self.log.append(("leave", index))
        self.left.append(index)

    def left_to_phone(self) -> list[int]:
        return [i for i in self.left if i not in self.reached]

    def claim(self, index: int) -> bool:
        self.left.remove(index)
        return True

    def request(self, index: int, level: str, *, taken_back: bool) -> None:
        self.log.append(("request", index, level, taken_back))

    def wait_near_done(self, index: int, head: int) -> bool:
        if head in self.complete_while_waiting and head != index:
            self.complete_while_waiting.discard(head)
            self.done.add(head)
            self.log.append(("complete", head))
            return False
        self.log.append(("near", index))
        return True

    def arrived(self, index: int) -> bool:
        return index in self.done

    def hand_over(self, index: int) -> None:
        self.log.append(("hand", index))

    def release(self, index: int) -> None:
        self.log.append(("release", index))

    def catch_up(self) -> None:
        pass

    def finish_left(self) -> None:
        self.log.append(("finish_left",))

    def of(self, kind: str) -> list[tuple]:
        return [entry for entry in self.log if entry[0] == kind]


def loop(shards: int, *, computes: bool = True, one_pass: bool = True, pass_shards: int | None = None,
         max_in_flight: int = 2, asked: tuple[int, ...] = ()) -> FetchLoop:
    return FetchLoop(shards, pass_shards=pass_shards or shards, one_pass=one_pass, max_in_flight=max_in_flight,
                     computes=computes, takes_back=True, asked=asked)


def test_fetch_only_requests_every_shard_in_order_and_hands_each_over_once():
    d = Script()
    fl = loop(5, computes=False)
    fl.run(d)
    assert [e[1] for e in d.of("request")] == [0, 1, 2, 3, 4]
    assert sorted(e[1] for e in d.of("hand")) == [0, 1, 2, 3, 4]
    assert fl.decided == [FETCH] * 5 and not fl.in_flight
    assert all(not e[2] for e in d.of("choose"))  # never asked whether to compute


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
def test_never_more_than_max_in_flight_requests_outstanding(max_in_flight):
    d = Script()
    loop(9, computes=False, max_in_flight=max_in_flight).run(d)
    out = 0
    for entry in d.log:
        out += {"request": 1, "hand": -1}.get(entry[0], 0)
        assert out <= max_in_flight
    # each request after the first waits for the one before it: near done, or handed over when
    # it was the only one allowed out
    requests = [i for i, e in enumerate(d.log) if e[0] == "request"]
    waited = "hand" if max_in_flight == 1 else "near"
    for before, after in zip(requests, requests[1:]):
        assert (waited, d.log[before][1]) in d.log[before:after]


def test_complete_downloads_are_handed_over_before_the_next_request():
    d = Script(done={0})
    loop(3, computes=False, max_in_flight=4).run(d)
    assert d.log.index(("hand", 0)) < d.log.index(("request", 2, "medium", False))


def test_a_download_that_completes_while_the_last_one_is_slow_is_handed_over_at_once():
    """Shard 0 completes while the loop waits for shard 1 (slow) to near its end: the decoder gets
    shard 0 then, not once shard 1 is near done (the model would stall on shard 0 meanwhile)."""
    d = Script(complete_while_waiting={0})
    loop(3, computes=False, max_in_flight=4).run(d)
    assert d.log.index(("request", 1, "medium", False)) < d.log.index(("complete", 0)) \
        < d.log.index(("hand", 0)) < d.log.index(("near", 1)) < d.log.index(("request", 2, "medium", False))


def test_the_phone_computes_a_prefix_only():
    """Shard 2 would be computed, but shard 1 was fetched: it is never even asked."""
    d = Script(computes={0, 2})
    fl = loop(4)
    fl.run(d)
    assert fl.decided == [COMPUTE, FETCH, FETCH, FETCH]
    assert ("choose", 2, True) not in d.log and ("leave", 2) not in d.log


def test_a_shard_the_phone_computed_before_its_turn_is_neither_requested_nor_asked_about():
    """The model extended the prefix past a download (shard 1), and got to shard 2 first as well."""
    d = Script(computes={0}, phone_computed={1, 2})
    fl = loop(4)
    fl.run(d)
    assert [e[1] for e in d.of("request")] == [3]
    assert fl.decided == [COMPUTE, COMPUTE, COMPUTE, FETCH]
    assert ("choose", 1, True) not in d.log and ("choose", 2, True) not in d.log


@pytest.mark.parametrize("takes_back", [True, False])
def test_past_the_first_block_the_loop_waits_for_the_cost_of_a_block(takes_back):
    d = Script(computes={0, 1})
    FetchLoop(3, pass_shards=3, one_pass=True, max_in_flight=2, computes=True, takes_back=takes_back).run(d)
    asked = next(i for i, e in enumerate(d.log) if e[0] in ("await", "timed?"))
    assert d.log.index(("leave", 0)) < asked < d.log.index(("choose", 1, True))
    assert d.of("request") == [("request", 2, "medium", False)]  # timed at once: nothing fetched ahead


def test_while_a_fresh_phone_times_its_first_block_the_link_fetches_the_pass_from_the_top_down():
    """Each request once the one before is near done; complete downloads handed over meanwhile;
    once the block is timed the loop plans from shard 1 on and never asks about those shards
    again, and the phone may still compute every shard below them (computing is a prefix)."""
    d = Script(computes={0, 1, 2}, untimed=3, done={7})
    fl = loop(8, max_in_flight=4)
    fl.run(d)
    ahead = [e[1:3] for e in d.of("request")][:3]
    assert ahead == [(7, "medium"), (6, "medium"), (5, "medium")]
    assert fl.ahead == [7, 6, 5]  # what the planner counts no more bytes for
    assert d.of("timed?")[:4] == [("timed?", None), ("timed?", 7), ("timed?", 6), ("timed?", 5)]
    assert d.log.index(("hand", 7)) < d.log.index(("request", 6, "medium", False))
    assert [e[1] for e in d.of("choose")][:3] == [0, 7, 6] and ("choose", 1, True) in d.log
    assert [e for e in d.of("choose") if e[1] in (5, 6, 7) and e[2]] == []
    assert fl.decided == [COMPUTE] * 3 + [FETCH] * 5
    assert sorted(e[1] for e in d.of("request")) == [3, 4, 5, 6, 7]  # each shard requested once


def test_fetching_ahead_stops_at_max_in_flight_and_then_waits_for_the_block():
    d = Script(computes={0}, untimed=10)
    fl = loop(9, max_in_flight=2)
    fl.run(d)
    first = d.log.index(("await",))
    assert [e[1] for e in d.of("request") if d.log.index(e) < first] == [8, 7] == fl.ahead
    assert fl.decided == [COMPUTE] + [FETCH] * 8


@pytest.mark.parametrize("one_pass", [True, False])
def test_only_a_policy_that_splits_fetches_ahead(one_pass):
    """A policy that never takes back (the phone alone, or a fixed split) asks nothing it could
    not be asked in order, in one pass or per step."""
    d = Script(computes={0, 1, 2, 3}, untimed=5)
    fl = FetchLoop(4, pass_shards=4 if one_pass else 2, one_pass=one_pass, max_in_flight=2, computes=True,
                   takes_back=False)
    fl.run(d)
    assert d.of("timed?") == [] and d.of("request") == [] and fl.ahead == []


def test_a_download_complete_below_ones_fetched_ahead_is_handed_over_before_them():
    """The top of the pass (5, 4), fetched ahead while the first block was timed, stalls; shards 2
    and 3, requested after them, complete: each goes to the decoder at once, and what is still in
    flight goes lowest first, the model's order (handed over in request order, shard 2 waited
    behind a download the model would end up computing instead: a hung top shard held the edit
    until the server let it go)."""
    d = Script(computes={0, 1}, untimed=2, done={2, 3})
    fl = loop(6, max_in_flight=4)
    fl.run(d)
    assert fl.ahead == [5, 4]
    assert d.of("hand") == [("hand", 2), ("hand", 3), ("hand", 4), ("hand", 5)]
    assert d.log.index(("hand", 2)) < d.log.index(("request", 3, "medium", False))


def test_a_shard_taken_back_goes_to_the_decoder_before_those_above_it():
    """Shard 2, taken back after 3 and 4 were requested, is the one the model needs first: when
    the loop must wait for a download to make room, it waits for that one."""
    d = Script(computes={0, 1, 2}, take_backs=["full", None])
    fl = loop(5)
    fl.run(d)
    assert d.of("hand") == [("hand", 3), ("hand", 2), ("hand", 4)]


def test_take_back_fetches_the_top_of_the_prefix_first_until_the_policy_says_stop():
    d = Script(computes={0, 1, 2}, take_backs=["full", "medium", None])
    fl = loop(5)
    fl.run(d)
    taken = [(e[1], e[2]) for e in d.of("request") if e[3]]
    assert taken == [(2, "full"), (1, "medium")]
    assert fl.decided == [COMPUTE, FETCH, FETCH, FETCH, FETCH]
    assert d.log.index(("finish_left",)) > d.log.index(("request", 1, "medium", True))


def test_a_shard_the_model_reached_is_not_taken_back():
    d = Script(computes={0, 1}, take_backs=["full"], reached={1})
    fl = loop(3)
    fl.run(d)
    assert ("take_back?", 0, 0) in d.log and not [e for e in d.of("request") if e[3] and e[1] == 1]


def test_per_step_models_may_compute_at_every_pass_start_and_never_take_back():
    """Three passes of two shards; the phone computes the first of each pass. A shard left to the
    phone goes to the model's queue behind the downloads before it (released, in order)."""
    d = Script(computes={0, 2, 4})
    fl = loop(6, one_pass=False, pass_shards=2, max_in_flight=4)
    fl.run(d)
    assert fl.decided == [COMPUTE, FETCH] * 3
    assert not [e for e in d.of("request") if e[3]]  # nothing taken back (the probes were declined)
    assert d.log.index(("release", 1)) < d.log.index(("leave", 2))
    assert d.log.index(("release", 3)) < d.log.index(("leave", 4))


def test_shards_asked_with_the_preamble_are_in_flight_from_the_start():
    d = Script()
    fl = loop(3, computes=False, asked=(0,))
    fl.run(d)
    assert [e[1] for e in d.of("request")] == [1, 2]
    assert ("hand", 0) in d.log and fl.decided == [FETCH] * 3


def test_a_loop_needs_room_for_one_request_and_one_shard_a_pass():
    with pytest.raises(ValueError):
        FetchLoop(3, pass_shards=0, one_pass=True, max_in_flight=1, computes=False, takes_back=False)
    with pytest.raises(ValueError):
        FetchLoop(3, pass_shards=3, one_pass=True, max_in_flight=0, computes=False, takes_back=False)


def per_step(shards: int, pass_shards: int, max_in_flight: int = 4, takes_back: bool = True) -> FetchLoop:
    return FetchLoop(shards, pass_shards=pass_shards, one_pass=False, max_in_flight=max_in_flight, computes=True,
                     takes_back=takes_back)


def test_a_per_step_pass_is_planned_once_the_model_has_begun_the_pass_before_it():
    """Planned all at once, every pass a phone computes was planned with the link's rate of one
    moment: a dip at one step had the phone compute every step after it (SD3.5 on a 5G trace). Each
    pass is planned once the model has asked for the first shard of the pass before it."""
    d = Script(computes=set(range(9)))
    per_step(9, 3, takes_back=False).run(d)
    assert d.of("model at") == [("model at", 0), ("model at", 3)]
    assert d.log.index(("model at", 0)) < d.log.index(("choose", 3, True))
    assert d.log.index(("leave", 2)) < d.log.index(("model at", 0))
    assert d.log.index(("model at", 3)) < d.log.index(("choose", 6, True))


def test_shards_in_flight_below_the_pass_begun_go_to_the_decoder_before_the_model_is_awaited():
    """The model cannot reach the pass before the next without them."""
    d = Script(computes={4})
    per_step(6, 2, takes_back=False).run(d)
    assert d.log.index(("hand", 1)) < d.log.index(("model at", 2)) < d.log.index(("choose", 4, True))
    assert d.log.index(("hand", 0)) < d.log.index(("hand", 1))


def test_a_pass_left_to_the_phone_with_the_link_idle_probes_the_top_of_the_pass():
    """The phone computes the pass from its start and nothing is in flight: the top of the pass is
    fetched from the top down while the policy would take it back, as many shards as may be in
    flight but one (the estimator judges the link over a window of downloads: one probe a pass
    left a dip's rate in it for several passes), so the next pass is planned on a fresh rate. The
    probes are listed ahead (the planner counts no bytes for them) and go to the model's queue in
    its order, before the next pass's first shard."""
    d = Script(computes=set(range(12)), take_backs=["full", "medium", "compact"] * 2)
    fl = per_step(12, 6)
    fl.run(d)
    assert [(e[1], e[2]) for e in d.of("request")] == [(5, "full"), (4, "medium"), (3, "compact"),
                                                       (11, "full"), (10, "medium"), (9, "compact")]
    assert fl.ahead == [5, 4, 3, 11, 10, 9]
    assert d.of("take_back?") == [("take_back?", 0, 5), ("take_back?", 0, 4), ("take_back?", 0, 3),
                                  ("take_back?", 6, 11), ("take_back?", 6, 10), ("take_back?", 6, 9)]
    assert d.log.index(("leave", 0)) < d.log.index(("request", 5, "full", False))
    assert fl.decided == [COMPUTE] * 3 + [FETCH] * 3 + [COMPUTE] * 3 + [FETCH] * 3
    assert [e[1] for e in d.log if e[0] in ("release", "leave", "hand")] == list(range(12))


def test_probing_stops_where_the_policy_would_leave_the_shard_to_the_phone():
    """The phone would compute its way to shard 4 before its download ended: no probe below 5
    (probing regardless stalled the model on 3G, where the phone computes every block anyway)."""
    d = Script(computes=set(range(6)), take_backs=["compact", None])
    fl = per_step(6, 6)
    fl.run(d)
    assert [e[1] for e in d.of("request")] == [5] == fl.ahead
    assert fl.decided == [COMPUTE] * 5 + [FETCH]


def test_a_probe_that_arrives_early_waits_for_the_shards_below_it():
    """The probes (5, 4, 3) complete before the shards below them that the policy fetches (1, 2):
    a per-step model's queues hold two shards in the model's order, so they go after those."""
    d = Script(computes={0}, done={3, 4, 5}, take_backs=["medium"] * 3)
    fl = per_step(6, 6)
    fl.run(d)
    assert fl.ahead == [5, 4, 3]
    assert d.of("hand") == [("hand", 1), ("hand", 2), ("hand", 3), ("hand", 4), ("hand", 5)]


def test_no_probe_while_the_link_is_busy_or_where_the_policy_never_fetches_ahead():
    """A download in flight keeps the estimate fresh already; the phone alone fetches nothing;
    one pass has no later pass to plan (a fresh phone fetches its top while it times a block)."""
    busy = Script(computes={2}, take_backs=["medium"])
    per_step(4, 2).run(busy)
    assert [e[1] for e in busy.of("request")] == [0, 1, 3]  # 3 probes the pass left to the phone
    alone = Script(computes=set(range(4)), take_backs=["medium"] * 4)
    per_step(4, 2, takes_back=False).run(alone)
    assert alone.of("request") == []
    one = Script(computes=set(range(4)), take_backs=["medium"] * 4)
    fl = FetchLoop(4, pass_shards=4, one_pass=True, max_in_flight=4, computes=True, takes_back=True)
    fl.run(one)
    assert fl.ahead == [] and not [e for e in one.of("request") if not e[3]]  # only take-backs


def test_complete_probes_leave_their_places_on_the_link_to_the_shards_below_them():
    """The probes (7, 6, 5) completed; the policy fetches shards 1 to 4 under them: those go out
    each once the one before is near done, at most ``max_in_flight`` of them, as if no probe were
    held (counted, the held probes left one place, and each request waited for a whole download)."""
    d = Script(computes={0}, done={5, 6, 7}, take_backs=["medium"] * 3)
    fl = per_step(8, 8)
    fl.run(d)
    assert fl.ahead == [7, 6, 5]
    first_hand = d.log.index(d.of("hand")[0])
    assert d.log.index(("request", 4, "medium", False)) < first_hand
    assert [e[1] for e in d.of("hand")] == [1, 2, 3, 4, 5, 6, 7]


def test_a_per_step_prefix_left_to_the_phone_is_re_judged_after_each_block_while_the_link_idles():
    """Three passes of four; the policy leaves every shard to the phone and declines each probe
    (a dip). While the loop waits to plan the next pass, after every block the model takes with
    nothing downloading, it asks again whether to take back the top of what the phone still has
    to compute, the lowest pass first (planned at a pass's start, a dip of a second or two had the
    phone compute the whole pass where the link came back a block later). A take-back goes to the
    model's queue before the next pass's first shard; while it downloads, nothing more is asked."""
    d = Script(computes=set(range(12)), take_backs=[None, "medium", None, None, "full", None])
    fl = per_step(12, 4)
    fl.run(d)
    assert [(e[1], e[2]) for e in d.of("request") if e[3]] == [(3, "medium"), (7, "full")]
    assert d.of("take_back?")[:6] == [("take_back?", 0, 3), ("take_back?", 1, 3), ("take_back?", 4, 7),
                                      ("take_back?", 2, 2), ("take_back?", 4, 7), ("take_back?", 8, 11)]
    assert fl.decided == [COMPUTE] * 3 + [FETCH] + [COMPUTE] * 3 + [FETCH] + [COMPUTE] * 4
    assert d.log.index(("model at", 0)) < d.log.index(("request", 3, "medium", True)) \
        < d.log.index(("release", 3)) < d.log.index(("leave", 4))
    after = d.log[d.log.index(("request", 7, "full", True)):]
    assert ("model at", 4) in after and ("take_back?", 8, 11) in after  # 7 in flight: asked again only at the probe
    assert [e for e in after[:after.index(("model at", 4))] if e[0] == "take_back?"] == []


def test_the_last_passes_are_re_judged_as_the_model_runs_them():
    """No pass is planned after the last, so the loop follows the model through the last two
    passes to the end: after each block it takes with the link idle, what the phone has still
    to compute is offered back to the plan (once, the last two steps of an edit were never
    re-judged)."""
    d = Script(computes=set(range(8)), take_backs=[None] * 12)
    fl = per_step(8, 4)
    fl.run(d)
    at = [e[1] for e in d.of("model at")]
    assert at == list(range(8))
    for block in range(4, 7):  # the model in the last pass: its top is offered back
        asked = d.log[d.log.index(("model at", block)) + 1]
        assert asked == ("take_back?", block + 1, 7)
    assert d.log.index(("model at", 7)) < d.log.index(("finish_left",))


def test_a_prefix_left_to_the_phone_in_one_pass_is_re_judged_after_each_block_while_the_link_idles():
    """One pass of six; the policy leaves 0-3 to the phone and, asked when the last shard above
    them is on its way, keeps them there (a surprise: the link's estimate had just collapsed).
    As the model computes, after every block it takes with nothing downloading, the loop asks
    again, and takes back as many blocks from the top as the policy then says (once, klein 4B
    computed 23 blocks with the link idle for 38 s where the surprise faded within seconds)."""
    d = Script(computes={0, 1, 2, 3}, take_backs=[None, None, "full", "medium", None])
    d.done.update({4, 5})
    fl = loop(6)
    fl.run(d)
    assert [(e[1], e[2]) for e in d.of("request") if e[3]] == [(3, "full"), (2, "medium")]
    assert d.of("take_back?")[:3] == [("take_back?", 0, 3), ("take_back?", 1, 3), ("take_back?", 2, 3)]
    assert d.log.index(("model at", 1)) < d.log.index(("request", 3, "full", True))
    assert fl.decided == [COMPUTE, COMPUTE, FETCH, FETCH, FETCH, FETCH]


def test_in_one_pass_nothing_is_asked_again_while_a_download_is_on_its_way():
    d = Script(computes={0, 1, 2, 3}, take_backs=[None] * 8)  # 4 and 5 never complete
    loop(6).run(d)
    assert d.of("take_back?") == [("take_back?", 0, 3)]
