"""One hypothesis seed per test run, so property tests explore new cases every run and a failure
says how to replay it: ``SAKURA_FUZZ_SEED=N`` reruns the cases of seed N; unset, the seed is
random. Decorate a ``@given`` test with ``@per_run_seed`` and call ``name_the_seed()`` in its
body: the note is printed with the falsifying example."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from typing import TypeVar

from hypothesis import note, seed

ENV = "SAKURA_FUZZ_SEED"
RUN_SEED: int = int(os.environ[ENV]) if os.environ.get(ENV, "").strip() else secrets.randbits(32)

Test = TypeVar("Test", bound=Callable[..., None])


def per_run_seed(test: Test) -> Test:
    return seed(RUN_SEED)(test)


def name_the_seed() -> None:
    note(f"hypothesis seed of this run: {RUN_SEED}; replay with {ENV}={RUN_SEED}")
