"""The timing model every level policy plans with (and the end-to-end simulator replays).

Shards are fetched one after another over one link, each request sent a round trip before the
previous response ends (so the link never idles between shards, as with HTTP request-ahead);
each is decoded when it has arrived and the decoder is free; the model consumes shard ``i`` when
it is decoded and the compute stage has reached the layer that needs it; it then computes for
``compute[i]`` seconds before it needs shard ``i + 1``. Whenever a decoded shard is later than
the compute stage, the compute stage stalls. Where the stage queues are bounded
(:attr:`PlanContext.window`), the link cannot run further ahead of the model than they hold
(:func:`request_lag`): a request, and a decode, also wait for the model to take the shards below.

A shard may also be *computed* on the phone (:data:`COMPUTE`): the template's reference tokens
through that block, which needs the blocks below it computed too, so computed shards are a prefix
of each pass of the reference tokens. Its KV is exact (the lossless level's quality), it costs no
link time, and it delays the compute stage by ``template_compute[i]``: the interleaved view of the
live client computing the prefix before the replay (the fetched shards are needed at the same
times either way).

A plan's score is its importance-weighted quality minus ``stall_penalty`` per second of delay
(stall, plus the phone's time computing template KV): with the default penalty a millisecond
outweighs any quality gain, so the earliest finish comes first and quality second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from sakura.edge_client.estimator import Estimate

#: (start time, bytes) -> seconds the link needs to deliver them.
TransferTime = Callable[[float, int], float]
DEFAULT_STALL_PENALTY = 1000.0
#: The option of computing a shard's KV on the phone instead of fetching it.
COMPUTE = "compute"


# -- timing constants of the live client (the end-to-end simulator replays them from here) -------
#: How often a download in flight is re-judged, and how long its rate is watched first (estimates).
ABANDON_CHECK_S = 0.02
ABANDON_MIN_S = 0.05
#: Shard requests out at once (an estimate: enough to keep a 5G link busy across a round trip).
MAX_IN_FLIGHT = 4
#: Depth of each bounded stage queue: encoded shards waiting for the decoder, and decoded shards
#: waiting for the model, at most (memory stays bounded by this window, not by the template).
MAX_AHEAD = 2


def with_preparation(known: tuple[float, ...], prepare_s: float, pass_shards: int, *,
                     shared: bool = False) -> tuple[float, ...]:
    """Each block's predicted seconds ``known``, with the source's preparation still to come
    (``prepare_s``) on the first block of each pass, since the phone pays it before whichever
    pass it starts first: all of it (what starting that pass costs now: the compute stage's
    judges), or, ``shared``, the pass's share of it (the planner's view). The source serves the
    pass started and every later one, and the planner weighs one pass at a time, so it charges
    pass ``k`` of ``P`` a ``1 / (P - k)`` share: all of it for the last pass, or a KV-cached
    model's one. Charged all of it at every pass, each of SD3.5's passes on a flagship NPU looked
    dearer to compute than it is, and the hybrid fetched every block on a very fast link
    (``tests/unit/evaluation/test_per_step_hybrid.py``)."""
    if not known or not prepare_s:
        return known
    passes = -(-len(known) // pass_shards)
    return tuple(s + (prepare_s / (passes - i // pass_shards) if shared else prepare_s)
                 if i % pass_shards == 0 else s for i, s in enumerate(known))


def fewest_bytes(shards: Sequence[ShardOption], first: int, end: int) -> int:
    """Bytes of shards ``first..end - 1``, each at its smallest level: what a download judged late
    still has behind it in its pass (:func:`~sakura.edge_client.late_download.judge_download`)."""
    return sum(min(shards[j].sizes.values()) for j in range(first, end))


def stage_window(shards: int, one_pass: bool) -> int:
    """How deep the stage queues are: :data:`MAX_AHEAD`, or every shard where the template KV is
    one pass of the reference tokens (a KV-cached model keeps all of it for the whole edit anyway,
    so shards held ahead of the model add nothing to the peak, and the link may run ahead of a
    phone computing the first blocks)."""
    return max(shards, MAX_AHEAD) if one_pass else MAX_AHEAD


def request_lag(window: int) -> int:
    """How far the fetch stage's next request can run ahead of the model, in shards, behind stage
    queues ``window`` deep: the request for shard ``j`` leaves once the fetch stage has handed the
    download of ``j - 1`` to the decoder, which takes it once it started decoding ``j - 1 - window``,
    which it does once the model took ``j - 2 - 2 * window`` (the decoded queue full before). Exact
    while downloads arrive before they are handed over (a fast link, where the bound binds);
    behind a slow link the link binds first."""
    return 2 + 2 * window


@dataclass(frozen=True)
class ShardOption:
    """One shard as a policy sees it: bytes to fetch per level (0 when cached) and its weight."""

    sizes: dict[str, int]
    weight: float = 1.0


@dataclass(frozen=True)
class PlanContext:
    """Everything a policy may know when it picks the level of shard ``index``.

    Times are seconds since the edit began. ``compute[i]`` is the predicted compute between
    consuming shard ``i`` and needing shard ``i + 1``; ``ready_at`` is when the compute stage is
    predicted to need shard ``index``.
    """

    now: float
    index: int
    levels: tuple[str, ...]  # smallest first
    shards: tuple[ShardOption, ...]
    utility: dict[str, float]
    estimate: Estimate | None
    rtt_s: float
    compute: tuple[float, ...]
    decode_s: dict[str, float]
    ready_at: float
    decode_free_at: float = 0.0
    #: The downloads in flight, in the order asked: when each one's bytes can flow and how many
    #: are still to come (:func:`in_flight`); the link carries them before a new request's.
    in_flight: tuple[tuple[float, int], ...] = ()
    #: Seconds the phone takes to compute each shard's template KV; empty when it cannot.
    template_compute: tuple[float, ...] = ()
    #: Shards per pass of the reference tokens (a KV-cached model has one pass: every shard).
    pass_shards: int = 0
    #: Whether shard ``index`` may still be computed (every earlier shard of its pass was).
    can_compute: bool = False
    #: Bytes the first shard fetched waits for, in a response of their own: the shard hashes
    #: object of a manifest that came without them (0 once it is on the phone).
    hashes_bytes: int = 0
    #: Depth of the pipeline's stage queues (:func:`stage_window`); 0 when unbounded.
    window: int = 0
    #: When the model is predicted to take each of the ``lag`` shards before ``index``, the
    #: nearest first (what the bounded queues make the plan's first requests wait for).
    taken_before: tuple[float, ...] = ()
    #: Shards of ``index``'s pass below it left to the phone that the model has not reached: the
    #: link could still take them back (:func:`take_back`).
    phone_before: int = 0

    @cached_property
    def lag(self) -> int:
        """:func:`request_lag` of the stage queues, or 0 where they never bind (one pass); a
        planner reads it for every shard of every plan it simulates, so it is worked out once."""
        return _binding_lag(self.window, len(self.shards))

    def size(self, level: str, index: int | None = None) -> int:
        return self.shards[self.index if index is None else index].sizes[level]

    def pass_end(self, index: int | None = None) -> int:
        """One past the last shard of the pass that holds ``index``."""
        index = self.index if index is None else index
        per = self.pass_shards or len(self.shards)
        return min(len(self.shards), (index // per + 1) * per)

    def cached(self, index: int | None = None) -> list[str]:
        """Levels of the shard that cost nothing to fetch, smallest first."""
        shard = self.shards[self.index if index is None else index]
        return [lvl for lvl in self.levels if shard.sizes[lvl] == 0]


@dataclass(slots=True)
class PlanState:
    """Where the pipeline stands while a plan is simulated."""

    fetch_free: float  # the link is free from here
    decode_free: float
    ready: float
    next_request: float = 0.0  # the next request can be sent from here
    quality: float = 0.0
    stall: float = 0.0
    computing: float = 0.0  # seconds the phone spent computing template KV
    hashes_due: int = 0  # bytes the next fetch waits for first (``PlanContext.hashes_bytes``)
    #: When the model took the plan's last ``PlanContext.lag`` shards (empty when unbounded).
    taken: tuple[float, ...] = ()

    def score(self, penalty: float) -> float:
        return self.quality - penalty * (self.stall + self.computing)


def start_state(ctx: PlanContext, transfer: TransferTime) -> PlanState:
    """Where a plan from ``ctx`` starts: the link is free once the bytes in flight are in, timed at
    the rate the plan is made at (the phone knows how many are still to come, not when they will be)."""
    link_free = ctx.now
    for flows_from, nbytes in ctx.in_flight:
        begin = max(link_free, flows_from)
        link_free = begin + transfer(begin, nbytes)
    return PlanState(fetch_free=link_free, decode_free=max(ctx.decode_free_at, ctx.now), ready=ctx.ready_at,
                     next_request=ctx.now, hashes_due=ctx.hashes_bytes)


def in_flight(now: float, rtt_s: float, downloads: Iterable[tuple[float, int, int]]) -> tuple[tuple[float, int], ...]:
    """:attr:`PlanContext.in_flight` from the downloads in flight, each ``(asked_at, received,
    length)`` in the order asked: what is still to come of one flows from now once its first byte is
    in, and not before a round trip after it was asked for while none is (live:
    ``ShardFetcher.in_flight``; simulated: ``SimulatedLink.in_flight``)."""
    return tuple((now if received else max(now, asked_at + rtt_s), length - received)
                 for asked_at, received, length in downloads if length > received)


def advance(state: PlanState, ctx: PlanContext, index: int, level: str, transfer: TransferTime) -> PlanState:
    """The state after shard ``index`` is fetched at ``level`` (or computed), decoded and consumed."""
    if level == COMPUTE:
        return _computed(state, ctx, index)
    fetch_free, request = _hashes_first(state.fetch_free, state.next_request, state.hashes_due, ctx.rtt_s, transfer)
    if ctx.lag:
        request = max(request, _taken(state, ctx, index, ctx.lag))
    arrival, next_request = _arrival(fetch_free, request, ctx.shards[index].sizes[level], ctx.rtt_s, transfer)
    decode_from = max(arrival, state.decode_free)
    if ctx.lag:  # the decoder hands its last shard on once fewer than ``window`` wait at the model
        decode_from = max(decode_from, _taken(state, ctx, index, 1 + ctx.window))
    decoded = decode_from + ctx.decode_s.get(level, 0.0)
    consumed = max(decoded, state.ready)
    return PlanState(
        fetch_free=arrival,
        decode_free=decoded,
        next_request=next_request,
        ready=consumed + ctx.compute[index],
        quality=state.quality + ctx.shards[index].weight * ctx.utility[level],
        stall=state.stall + max(0.0, decoded - state.ready),
        computing=state.computing,
        taken=_remember(state, ctx, consumed),
    )


def _taken(state: PlanState, ctx: PlanContext, index: int, back: int) -> float:
    """When the model takes shard ``index - back`` (``back <= ctx.lag``), the plan having reached
    shard ``index``: one of the plan's own last shards, else predicted from the context (a shard
    before the plan's first; 0 before the edit's)."""
    if back <= len(state.taken):
        return state.taken[-back]
    before = back - len(state.taken)  # that many shards before the plan's first
    return ctx.taken_before[before - 1] if before <= len(ctx.taken_before) else 0.0


def _remember(state: PlanState, ctx: PlanContext, consumed: float) -> tuple[float, ...]:
    """``state.taken`` with the shard the model takes at ``consumed`` added (the last ``lag`` kept)."""
    return (*state.taken, consumed)[-ctx.lag:] if ctx.lag else ()


def _hashes_first(link_free: float, request: float, hashes: int, rtt_s: float,
                  transfer: TransferTime) -> tuple[float, float]:
    """Where the link and the next request stand once the ``hashes`` bytes a shard fetch waits for
    have arrived (the live fetcher asks for its shard only then)."""
    if not hashes:
        return link_free, request
    arrival, _ = _arrival(link_free, request, hashes, rtt_s, transfer)
    return arrival, arrival


def _arrival(link_free: float, request: float, size: int, rtt_s: float, transfer: TransferTime) -> tuple[float, float]:
    """When a response of ``size`` bytes has arrived (its request leaves at ``request``, its bytes
    follow what the link carries until ``link_free``), and when the next request may leave (a
    round trip before that); nothing to fetch arrives at once."""
    if not size:
        return link_free, request
    begin = max(link_free, request + rtt_s)
    arrival = begin + transfer(begin, size)
    return arrival, max(request, arrival - rtt_s)


def _computed(state: PlanState, ctx: PlanContext, index: int) -> PlanState:
    seconds = ctx.template_compute[index]
    return PlanState(fetch_free=state.fetch_free, decode_free=state.decode_free, next_request=state.next_request,
                     ready=state.ready + seconds + ctx.compute[index], stall=state.stall,
                     computing=state.computing + seconds, hashes_due=state.hashes_due,
                     quality=state.quality + ctx.shards[index].weight * max(ctx.utility.values()),
                     taken=_remember(state, ctx, state.ready + seconds))


def best_split(ctx: PlanContext, transfer: TransferTime, penalty: float = DEFAULT_STALL_PENALTY) -> int:
    """How many shards of the current pass, from ``ctx.index``, to compute on the phone before
    fetching the rest: the split whose plan (the rest fetched at one level, the best of each)
    scores highest over the pass, the smaller on ties. 0 when the phone cannot compute.

    Exact, but pruned: a plan's delay (stall plus computing) only grows as it is simulated, and no
    plan's quality exceeds another's by more than the pass's weight times the utility range, so a
    plan is dropped once its delay passes the least complete delay found by that margin. Both pure
    plans go first: one of them is usually near the best, so the others are dropped early."""
    if not (ctx.can_compute and ctx.template_compute):
        return 0
    end = ctx.pass_end()
    prefix = [start_state(ctx, transfer)]  # prefix[k]: the first k shards computed
    for index in range(ctx.index, end):
        prefix.append(_computed(prefix[-1], ctx, index))
    n = end - ctx.index
    utilities = [ctx.utility[lv] for lv in ctx.levels]
    weight = sum(ctx.shards[i].weight for i in range(ctx.index, end))
    margin = weight * (max(ctx.utility.values()) - min(utilities)) / penalty
    least = prefix[n].stall + prefix[n].computing
    scores = {n: prefix[n].score(penalty)}
    for split in range(n):
        for level in ctx.levels:
            state = _fetched(prefix[split], ctx, split, level, end, transfer, least + margin)
            if state is None:
                continue
            least = min(least, state.stall + state.computing)
            scores[split] = max(scores.get(split, float("-inf")), state.score(penalty))
    top = max(scores.values())
    return min(split for split, score in scores.items() if score >= top - 1e-9)


def take_back(ctx: PlanContext, top: int, transfer: TransferTime, penalty: float = DEFAULT_STALL_PENALTY) -> str | None:
    """Re-planning the other way: shards ``ctx.index..top`` are left to the phone, which has not
    reached them yet, and every shard above ``top`` is fetched already. The plans: fetch the top
    ``k`` of them, top down (the order the fetch stage takes them back in), at one level, and
    compute the rest. Returns the level of the best-scoring plan that fetches ``top``, or None
    when computing them all scores best (ties go to fewer bytes). Linear in the prefix (a
    per-step model's loop asks after each block while the link idles): :func:`_fetching_top_down`."""
    computed = [start_state(ctx, transfer)]  # computed[m]: the first m of them computed
    for index in range(ctx.index, top + 1):
        computed.append(_computed(computed[-1], ctx, index))
    scores = {level: _fetching_top_down(ctx, top, level, transfer, computed, penalty) for level in ctx.levels}
    best_score, best_level = computed[-1].score(penalty), None
    for k in range(1, top - ctx.index + 2):
        for level, by_k in scores.items():
            if by_k[k - 1] > best_score + 1e-9:
                best_score, best_level = by_k[k - 1], level
    return best_level


def _fetching_top_down(ctx: PlanContext, top: int, level: str, transfer: TransferTime, computed: list[PlanState],
                       penalty: float) -> list[float]:
    """The score of each plan that fetches the top ``k`` shards from ``top`` down at ``level`` and
    computes the rest (``computed``: the states with a prefix computed), for k = 1, 2, ... The
    requests go out in the same order whatever ``k`` is, so each shard is decoded at the same
    time in every plan that fetches it; and the model, ready at ``r`` for the fetched tail, is done
    with it at max(r + its compute, the latest of each fetched shard's decode plus the compute
    from it on), having stalled for the difference. So one pass scores every plan."""
    decoded = fetched_top_down(ctx, top, top - ctx.index + 1, level, transfer)
    scores, tail_compute, latest, tail_quality = [], 0.0, -math.inf, 0.0
    for first in range(top, ctx.index - 1, -1):
        tail_compute += ctx.compute[first]
        latest = max(latest, decoded[first] + tail_compute)
        tail_quality += ctx.shards[first].weight * ctx.utility[level]
        prefix = computed[first - ctx.index]
        stall = prefix.stall + max(0.0, latest - prefix.ready - tail_compute)
        scores.append(prefix.quality + tail_quality - penalty * (stall + prefix.computing))
    return scores


def fetched_top_down(ctx: PlanContext, top: int, k: int, level: str, transfer: TransferTime) -> dict[int, float]:
    """When each of the top ``k`` shards from ``top`` down is decoded, fetched at ``level`` in that
    order from the start state (what :func:`take_back` weighs)."""
    state = start_state(ctx, transfer)
    fetch_free, request, decode_free = state.fetch_free, state.next_request, state.decode_free
    if k:
        fetch_free, request = _hashes_first(fetch_free, request, state.hashes_due, ctx.rtt_s, transfer)
    decoded: dict[int, float] = {}
    for index in range(top, top - k, -1):
        fetch_free, request = _arrival(fetch_free, request, ctx.shards[index].sizes[level], ctx.rtt_s, transfer)
        decode_free = decoded[index] = max(fetch_free, decode_free) + ctx.decode_s.get(level, 0.0)
    return decoded


def _fetched(state: PlanState, ctx: PlanContext, split: int, level: str, end: int, transfer: TransferTime,
             limit: float) -> PlanState | None:
    """``state`` after the shards from ``ctx.index + split`` to ``end`` are fetched at ``level``;
    None once its delay exceeds ``limit``."""
    for index in range(ctx.index + split, end):
        state = advance(state, ctx, index, level, transfer)
        if state.stall + state.computing > limit:
            return None
    return state


def simulate(ctx: PlanContext, plan: Sequence[str], transfer: TransferTime) -> PlanState:
    state = start_state(ctx, transfer)
    for offset, level in enumerate(plan):
        state = advance(state, ctx, ctx.index + offset, level, transfer)
    return state


def constant_rate(bytes_per_s: float) -> TransferTime:
    rate = max(bytes_per_s, 1.0)
    return lambda _start, nbytes: nbytes / rate


def level_utility(level_bytes: dict[str, int]) -> dict[str, float]:
    """Quality of each level: 1 + ln(its size / the smallest level's), the log-rate utility of
    adaptive streaming (diminishing returns per extra byte)."""
    smallest = max(1, min(level_bytes.values()))
    return {name: 1.0 + math.log(max(size, smallest) / smallest) for name, size in level_bytes.items()}


def normalised_weights(weights: Sequence[float]) -> list[float]:
    """Shard weights scaled to mean 1 (all 1 when unknown or all zero)."""
    total = sum(weights)
    if total <= 0:
        return [1.0] * len(weights)
    return [w * len(weights) / total for w in weights]


def encode_on_phone(nbytes: int, encode_s: float | None, estimate: Estimate | None, rtt_s: float) -> bool:
    """Whether a phone that holds the model's text encoder computes a template's prompt embeddings
    (``encode_s`` seconds, None if never measured) rather than fetch them (``nbytes``: a round trip
    and the bytes at the estimated rate). With either time unknown it encodes, as the phone alone
    would: not knowing the link never makes it slower than that."""
    if encode_s is None or estimate is None:
        return True
    return encode_s <= rtt_s + nbytes / estimate.bytes_per_s


def plan_context(now: float, index: int, *, levels: Sequence[str], shards: Sequence[ShardOption],
                 utility: dict[str, float], estimate: Estimate | None, rtt_s: float, compute: Sequence[float],
                 startup: float, decode_s: dict[str, float], compute_start: float,
                 last_consumed: tuple[int, float] | None, decode_free_at: float | None = None,
                 downloads: Iterable[tuple[float, int, int]] = (), template_compute: Sequence[float] = (),
                 computed: Sequence[int] = (), ahead: Sequence[int] = (), can_compute: bool = False,
                 pass_shards: int = 0, hashes_bytes: int = 0, window: int = 0) -> PlanContext:
    """The context of shard ``index`` at ``now``, for the live pipeline and the simulator alike.

    ``compute``/``startup``: the compute the stage is known to do after each shard / before the
    first; ``last_consumed``: the last shard the model has consumed and when (None before the
    first); ``computed``: shards left to the phone, whose ``template_compute`` the stage spends on
    its way to ``index``; ``ahead``: the top of the pass, requested while a fresh phone timed its
    first block (:attr:`FetchLoop.ahead`): those above ``index`` are on their way, with no byte
    left to plan for (what is still to come of them is in ``downloads``, the downloads in flight
    as :func:`in_flight` reads them). ``decode_free_at`` defaults to ``now``. ``window``: the stage
    queues' depth (:func:`stage_window`), 0 when unbounded.
    """
    if last_consumed is None:
        first, ready = 0, compute_start + startup + sum(compute[:index])
    else:
        last, at = last_consumed
        first, ready = last + 1, at + sum(compute[last:index])
    left_to_phone = set(computed)
    phone_s = {j: template_compute[j] for j in left_to_phone if j < len(template_compute)}
    ready += sum(phone_s.get(j, 0.0) for j in range(first, index))
    pass_first = index - index % pass_shards if pass_shards else 0
    phone_before = sum(1 for j in left_to_phone if max(first, pass_first) <= j < index)
    on_the_way = {j for j in ahead if j > index}
    if on_the_way:
        shards = [ShardOption(dict.fromkeys(s.sizes, 0), s.weight) if j in on_the_way else s
                  for j, s in enumerate(shards)]
    return PlanContext(
        now=now, index=index, levels=tuple(levels), shards=tuple(shards), utility=utility, estimate=estimate,
        rtt_s=rtt_s, compute=tuple(compute), decode_s=decode_s, ready_at=ready,
        decode_free_at=now if decode_free_at is None else decode_free_at,
        in_flight=in_flight(now, rtt_s, downloads),
        template_compute=tuple(template_compute), can_compute=can_compute, pass_shards=pass_shards,
        hashes_bytes=hashes_bytes, window=window, phone_before=phone_before,
        taken_before=_taken_before(ready, index, _binding_lag(window, len(shards)), compute, phone_s))


def _binding_lag(window: int, shards: int) -> int:
    """:func:`request_lag` of queues ``window`` deep where it can bind (fewer shards ahead than the
    edit has), else 0 (also for unbounded queues, ``window`` 0)."""
    lag = request_lag(window) if window else 0
    return lag if lag < shards else 0


def _taken_before(ready: float, index: int, lag: int, compute: Sequence[float],
                  phone_s: dict[int, float]) -> tuple[float, ...]:
    """When the model takes each of the ``lag`` shards before ``index`` (the nearest first), back
    from ``ready`` (when it needs ``index``): a shard is taken ``compute`` before the next is
    needed, and a shard left to the phone is needed ``phone_s`` before it is taken (no stalls
    assumed: a fetched shard stalling takes it later, which only frees the queues later)."""
    taken, at = [], ready
    for k in range(index - 1, max(-1, index - 1 - lag), -1):
        at -= compute[k]
        taken.append(at)
        at -= phone_s.get(k, 0.0)
    return tuple(taken)
