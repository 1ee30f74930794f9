"""Adapters install per-instance processors: concurrent replays never interfere."""

from __future__ import annotations

import threading

import torch

from sakura.platform.models import Schedule, load_model
from tests.conftest import make_request, make_template


def _prepare(name: str, seed: int):
    adapter = load_model(name)
    schedule = Schedule(steps=3)
    template = make_template(adapter)
    kv = adapter.capture(template, make_request(adapter, "skimage:astronaut", seed=seed), schedule).kv
    request = make_request(adapter, "skimage:chelsea", seed=seed + 10)
    return lambda: adapter.replay(kv, template.prompt, request, schedule)


def test_two_threads_on_two_instances_match_running_alone():
    jobs = [_prepare("tiny-flux", 1), _prepare("tiny-sd3", 2), _prepare("tiny-flux", 3)]
    alone = [job() for job in jobs]

    results: dict[int, list[torch.Tensor]] = {i: [] for i in range(len(jobs))}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(jobs))

    def worker(i: int) -> None:
        try:
            barrier.wait()
            for _ in range(3):
                results[i].append(jobs[i]())
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for i, expected in enumerate(alone):
        assert len(results[i]) == 3
        for got in results[i]:
            torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_one_instance_shared_by_two_threads_keeps_runs_apart():
    adapter = load_model("tiny-flux")
    schedule = Schedule(steps=2)
    template = make_template(adapter)
    kv = adapter.capture(template, make_request(adapter, "skimage:astronaut", seed=1), schedule).kv
    request = make_request(adapter, "skimage:chelsea", seed=5)
    expected_replay = adapter.replay(kv, template.prompt, request, schedule)
    expected_full = adapter.full(template, request, schedule)
    out: dict[str, torch.Tensor] = {}
    barrier = threading.Barrier(2)

    def run(kind: str) -> None:
        barrier.wait()
        if kind == "replay":
            out[kind] = adapter.replay(kv, template.prompt, request, schedule)
        else:
            out[kind] = adapter.full(template, request, schedule)

    threads = [threading.Thread(target=run, args=(k,)) for k in ("replay", "full")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    torch.testing.assert_close(out["replay"], expected_replay, rtol=0, atol=0)
    torch.testing.assert_close(out["full"], expected_full, rtol=0, atol=0)
