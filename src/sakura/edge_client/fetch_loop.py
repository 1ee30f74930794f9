"""The fetch stage's loop: which shard to request next, when, and which to leave to the phone.

One implementation, two drivers. :class:`FetchLoop` holds the decisions (what each shard became,
what is in flight) and no clock, thread or link: it asks a :class:`FetchDriver` for what it needs
to know (the policy's choice, whether a download is complete) and tells it what to do (request,
wait, hand over). The live pipeline (:mod:`sakura.edge_client._pipeline`) drives it with threads
over a real link; the simulator (:mod:`sakura.evaluation.simulator`) drives it with events over a
bandwidth trace. So every change to the loop is a change to both.

The loop (``docs/architecture.md``, "The fetch stage"):

1. For each shard in order: if the phone may compute it (it starts a pass, or the shard before it
   is computed or left to the phone and no download of a shard below it is in flight), the policy
   may leave it to the phone. Past the first block, a fresh phone first waits until a block was
   timed; meanwhile, in one pass of the reference tokens of a policy that splits it (one that
   takes back), the link fetches the pass from its top down. A per-step model's pass is planned
   once the model has begun the pass before it; where a policy that splits leaves the start of a
   pass to the phone with the link idle, the top of the pass is fetched while the policy would
   take it back (the *probe*), so that the link's estimate stays fresh while the phone computes.
2. Otherwise make room (at most ``max_in_flight`` out, the last request near done, every complete
   download handed over to the decoder as it completes) and request it at the level the policy
   chooses then.
3. Take back the top of a prefix left to the phone one block at a time while the policy says its
   download ends before the phone would have computed it and the model has not reached it: in
   one pass of the reference tokens once every shard above the prefix is on its way, and again
   after each block the model takes while the link idles; a per-step model's passes after each
   block the model takes while the loop waits to plan the next pass (and after the last pass is
   planned, to the last block).
4. Hand over what is still in flight, lowest shard first (the model's order; a complete download
   is handed over as soon as it is complete, so one stalled above it never holds it up); the
   phone computes what is left to it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Protocol

from sakura.edge_client.planning import COMPUTE

__all__ = ["FETCH", "FetchDriver", "FetchLoop"]

#: What the loop decided for a shard it requested (the other decision is :data:`COMPUTE`).
FETCH = "fetch"


class FetchDriver(Protocol):
    """The mechanics under the loop: a clock, a link, a decoder and a model, real or simulated."""

    def stopped(self) -> bool:
        """The edit failed or was cancelled: stop requesting."""

    def computed(self, index: int) -> bool:
        """The model computed shard ``index`` already (it extended the prefix past a download)."""

    def await_template_cost(self) -> None:
        """Return once the phone knows what computing a block costs (a fresh phone times one first)."""

    def await_model(self, index: int) -> None:
        """Return once the model has asked for shard ``index`` (every shard below it is handed over
        or left to the phone), or the edit stopped."""

    def template_timed(self, near: int | None) -> bool:
        """Whether the phone knows what computing a block costs; where ``near`` is given (the last
        shard requested), first wait until it does or until that download is within a round trip
        of done, whichever comes first."""

    def choose(self, index: int, *, can_compute: bool) -> str:
        """The policy's choice for shard ``index`` now: a level, or ``COMPUTE`` when ``can_compute``."""

    def take_back(self, first: int, top: int) -> str | None:
        """The level to fetch shard ``top`` (the top of the prefix left to the phone, which starts
        at ``first``) at after all, or None to leave it to the phone."""

    def leave_to_phone(self, index: int) -> None:
        """Shard ``index`` is the phone's to compute when the model reaches it."""

    def left_to_phone(self) -> list[int]:
        """The shards left to the phone that the model has not asked for yet, in order."""

    def claim(self, index: int) -> bool:
        """Fetch shard ``index`` after all, unless the model asked for it meanwhile."""

    def request(self, index: int, level: str, *, taken_back: bool) -> None:
        """Send shard ``index``'s request for ``level``."""

    def wait_near_done(self, index: int, head: int) -> bool:
        """Wait until the download of shard ``index`` (the last requested) is within a round trip
        of done, or the download of shard ``head`` (the first still in flight) is complete,
        whichever comes first; True if the former."""

    def arrived(self, index: int) -> bool:
        """The download of shard ``index`` is complete."""

    def hand_over(self, index: int) -> None:
        """Wait for the download of shard ``index`` and give it to the decoder."""

    def release(self, index: int) -> None:
        """Give shard ``index`` (in flight) to the model's queue now, because a per-step shard left
        to the phone must queue behind it (a simulator does not hold the fetch stage for it)."""

    def catch_up(self) -> None:
        """Let the model take the shards left to the phone that it has reached (a simulator's
        events; live, the compute stage does so on its own)."""

    def finish_left(self) -> None:
        """The model computes every shard still left to the phone (a simulator waits for it)."""


class FetchLoop:
    """One edit's fetch decisions. ``pass_shards``: shards per pass of the model (all of them for
    a model that keeps the template's KV, one step's for a per-step model); ``one_pass``: the
    model runs the reference tokens once (it keeps their KV); ``computes``: the phone
    may compute template blocks (a hybrid policy with a template computer); ``takes_back``: the
    policy splits passes and re-plans a prefix left to the phone (while a fresh phone times its
    first block, it has the pass fetched from its top; on a per-step model, it probes the link
    with the top of a pass it leaves to the phone); ``asked``: shards already requested (shard 0
    asked for with the preamble)."""

    def __init__(self, shards: int, *, pass_shards: int, one_pass: bool, max_in_flight: int, computes: bool,
                 takes_back: bool, asked: Iterable[int] = ()) -> None:
        if pass_shards < 1 or max_in_flight < 1:
            raise ValueError("a pass and the requests in flight hold at least one shard")
        self.shards, self.pass_shards, self.one_pass, self.max_in_flight = shards, pass_shards, one_pass, max_in_flight
        self.computes, self.takes_back = computes, takes_back and computes and one_pass
        #: A per-step model's passes are planned one at a time, as the model comes near them.
        self.paces = computes and not one_pass
        self.probes = takes_back and self.paces and pass_shards > 1 and max_in_flight > 1
        #: Per shard: ``COMPUTE`` once left to the phone, ``FETCH`` once requested, else None.
        self.decided: list[str | None] = [None] * shards
        self.in_flight: deque[int] = deque()  # requested, not yet handed to the decoder
        #: Shards requested from the top of a pass ahead of the shards below it: while a fresh phone
        #: timed its first block, and a per-step model's probes.
        self.ahead: list[int] = []
        self._deciding = 0  # the shard the loop decides now: every one below it is decided
        for index in asked:
            self.decided[index] = FETCH
            self.in_flight.append(index)

    def run(self, d: FetchDriver) -> None:
        for index in range(len(self.in_flight), self.shards):
            self._deciding = index
            if self.decided[index] is not None:  # requested ahead, from the top of the pass
                continue
            if self.paces and index % self.pass_shards == 0 and index >= self.pass_shards:
                self._await_pass_before(index, d)
            if self.may_compute(index, d):
                if index > 0:
                    self._time_a_block(index, d)
                if d.computed(index) or d.choose(index, can_compute=True) == COMPUTE:
                    self._leave_to_phone(index, d)
                    if self.probes and index % self.pass_shards == 0 and not self.in_flight:
                        self._probe(index, d)
                    continue
            self.make_room(d)
            if d.stopped():
                break
            if d.computed(index):  # the phone got there first
                continue
            self._request(index, d.choose(index, can_compute=False), d)
        self._deciding = self.shards
        if self.takes_back:
            self._take_back(d)
            left = d.left_to_phone()
            if left:  # the prefix is re-judged as the model computes it
                self._take_back_while_the_model_runs(left[0], left[-1], d)
        if self.probes:  # the last passes, as the model runs them
            last = (self.shards - 1) // self.pass_shards * self.pass_shards
            self._take_back_while_the_model_runs(max(last - self.pass_shards + 1, 0), self.shards - 1, d)
        while self.in_flight and not d.stopped():
            self._hand_over_lowest(d)
        d.finish_left()

    def may_compute(self, index: int, d: FetchDriver) -> bool:
        """The phone may compute shard ``index``: it starts a pass, or the shard before it is
        computed or left to the phone and no download is in flight (computing is a prefix)."""
        if not self.computes:
            return False
        if index % self.pass_shards == 0:
            return True
        below = any(j < index for j in self.in_flight)
        return not below and (self.decided[index - 1] == COMPUTE or d.computed(index - 1))

    def make_room(self, d: FetchDriver) -> None:
        """Wait until the next request may leave: fewer than ``max_in_flight`` out and the last one
        near done; hand each complete download over as it completes meanwhile (the decoder and
        the model need not wait for a slow download behind it)."""
        if self._downloading(d) >= self.max_in_flight:
            self._hand_over_lowest(d)
        near = not self.in_flight
        while True:
            self._hand_over_arrived(d)
            if near or not self.in_flight:
                break
            near = d.wait_near_done(self.in_flight[-1], min(self.in_flight))
        d.catch_up()

    def _await_pass_before(self, index: int, d: FetchDriver) -> None:
        """Plan a per-step model's pass (from shard ``index``) once the model has begun the pass
        before it. Decided all at once, the passes a phone computes were planned with the link's
        rate of that moment, and a dip at one step had the phone compute every step after it
        (SD3.5 on a 5G trace: 114 s where fetching every block took 77 s). A pass's worth of
        compute still lies ahead for the fetches; the shards in flight below the pass begun go
        to the decoder first (the model needs them on its way)."""
        begun = index - self.pass_shards
        self._hand_over_below(begun, d)
        if self.probes:
            self._take_back_while_the_model_runs(max(begun - self.pass_shards + 1, 0), begun, d)
        else:
            d.await_model(begun)

    def _take_back_while_the_model_runs(self, first: int, last: int, d: FetchDriver) -> None:
        """Follow the model from block ``first`` to ``last``; after each block it takes with the
        link idle, offer the top of what is left to the phone back to the plan: in one pass of the
        reference tokens as many blocks as the policy takes (:meth:`_take_back`), a per-step
        model's one (:meth:`_take_back_one`). In one pass the prefix was judged once, when the
        last shard above it was on its way: judged in a surprise (a cell a fortieth as fast as the
        last three seconds), klein 4B on the flagship GPU computed all 23 blocks left to it, 38 s
        with the link idle, where the surprise had faded within seconds (1.63 of fetching them)."""
        for block in range(first, last + 1):
            self._hand_over_below(block, d)  # those taken back
            d.await_model(block)
            if d.stopped():
                return
            if not (d.left_to_phone() and all(d.arrived(j) for j in self.in_flight)):  # the link idles
                continue
            if self.one_pass:
                self._take_back(d)
            else:
                self._take_back_one(d)

    def _probe(self, index: int, d: FetchDriver) -> None:
        """The phone computes the start of a per-step pass (from shard ``index``) and nothing is
        in flight: fetch the top of the pass from the top down, as many shards as may be in flight
        but one, each while the policy would take it back from the phone (its download ends before
        the phone would have computed its way to it: ``take_back``), so the link's estimate is
        fresh when the next pass is planned. Without it, the rate of a dip stood for the rest of
        the edit (nothing was fetched to correct it); one probe a pass left the dip in the
        estimator's window for several passes; and probing where the plan says the phone gets
        there first stalled the model on 3G. Where the phone does compute all, the model computes
        a late probe instead (the extend rule)."""
        top = min(index + self.pass_shards, self.shards) - 1
        for probe in range(top, max(index, top - self.max_in_flight + 1), -1):
            if d.stopped():
                return
            level = d.take_back(index, probe)
            if level is None:
                return
            self._request(probe, level, d)
            self.ahead.append(probe)

    def _downloading(self, d: FetchDriver) -> int:
        """Requests that hold a place on the link: those in flight but the complete ones fetched
        ahead (a per-step model's probes wait for the shards below them, the model's order; held
        in the count, they kept the shards the policy fetched under them from going out ahead of
        need, each a round trip late: Kontext at 360 Mbit/s took 2.3x as long)."""
        return sum(1 for j in self.in_flight if j not in self.ahead or not d.arrived(j))

    def _hand_over_lowest(self, d: FetchDriver) -> None:
        """Hand the lowest shard in flight to the decoder (waiting for its download): the one the
        model needs first, which is not always the first requested (the top of the pass is fetched
        ahead, a take-back goes below shards already on their way)."""
        index = min(self.in_flight)
        self.in_flight.remove(index)
        d.hand_over(index)

    def _hand_over_below(self, index: int, d: FetchDriver) -> None:
        """Hand every shard in flight below shard ``index`` to the decoder, lowest first (the model
        needs them before it)."""
        while self.in_flight and min(self.in_flight) < index and not d.stopped():
            self._hand_over_lowest(d)

    def _hand_over_arrived(self, d: FetchDriver) -> None:
        """Hand every complete download to the decoder at once, lowest first, so that a download
        stalled near the top of the pass never holds up a complete one below it (the model would
        wait for that one's decode behind a download it may end up computing instead). In one
        pass any complete one goes (the stage queues hold every shard of the pass:
        :func:`~sakura.edge_client.planning.stage_window`); a per-step model's queues hold two, so
        only the lowest in flight goes, or shards decoded ahead could fill them before it."""
        while self.in_flight:
            candidates = sorted(self.in_flight) if self.one_pass else [min(self.in_flight)]
            if not self.one_pass and candidates[0] > self._deciding:
                return  # a probe: the model takes it in its turn, once every shard below it is decided
            done = [index for index in candidates if d.arrived(index)]
            if not done:
                return
            for index in done:
                self.in_flight.remove(index)
                d.hand_over(index)

    def _time_a_block(self, index: int, d: FetchDriver) -> None:
        """Plan past the first block only once what a block costs this phone is known: a fresh
        phone computes one to learn it. Meanwhile the link would idle, so in one pass of a policy
        that splits it, the fetch stage requests the pass from its top down, each request once the
        one before is near done, at most ``max_in_flight`` out: computing is a prefix, so every
        split but computing all of it fetches those shards (and if the phone does compute all, the
        model computes a late one instead when it reaches it); their downloads also teach the
        estimator the link's rate before the split is planned."""
        top = self.shards - 1
        while self.takes_back and top > index and len(self.in_flight) < self.max_in_flight and not d.stopped():
            if d.template_timed(self.in_flight[-1] if self.in_flight else None):
                return
            self._hand_over_arrived(d)
            self._request(top, d.choose(top, can_compute=False), d)
            self.ahead.append(top)
            top -= 1
        d.await_template_cost()

    def _request(self, index: int, level: str, d: FetchDriver, *, taken_back: bool = False) -> None:
        self.decided[index] = FETCH
        d.request(index, level, taken_back=taken_back)
        self.in_flight.append(index)

    def _leave_to_phone(self, index: int, d: FetchDriver) -> None:
        """In one pass the shard waits for the model to reach it (it may be taken back meanwhile);
        a per-step model's goes to the model's queue now, behind the downloads before it."""
        self.decided[index] = COMPUTE
        if not self.one_pass:  # a per-step model's shards go out in order: those below it first
            for below in sorted(j for j in self.in_flight if j < index):
                self.in_flight.remove(below)
                d.release(below)
        d.leave_to_phone(index)

    def _take_back(self, d: FetchDriver) -> None:
        """In one pass, once every shard above the prefix left to the phone is on its way: take
        back its top, one block at a time, while :meth:`_take_back_one` does."""
        while True:
            self.make_room(d)
            if d.stopped() or not self._take_back_one(d):
                return

    def _take_back_one(self, d: FetchDriver) -> bool:
        """Re-plan the other way: take back the top of a prefix left to the phone (the lowest
        pass's first) if the policy says its download ends before the phone would have computed
        its way to it and the model has not reached it. A per-step model's passes are re-judged
        so after each block the model takes while the link idles (:meth:`_await_pass_before`):
        planned at a pass's start, a dip of a second or two had the phone compute the whole
        pass, where the link came back a block later (SD3.5 on a 5G drive computed whole steps
        that fetch-only rode out with one slow step)."""
        for prefix in self._prefixes(d.left_to_phone()):
            level = d.take_back(prefix[0], prefix[-1])
            if level is not None and d.claim(prefix[-1]):
                self._request(prefix[-1], level, d, taken_back=True)
                return True
        return False

    def _prefixes(self, left: list[int]) -> list[list[int]]:
        """The shards left to the phone (in order), pass by pass."""
        passes: dict[int, list[int]] = {}
        for index in left:
            passes.setdefault(index // self.pass_shards, []).append(index)
        return list(passes.values())
