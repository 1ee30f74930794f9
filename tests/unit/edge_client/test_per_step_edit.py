"""A per-step model (FLUX.1 Kontext, a KV per step and block) computed on the phone, live: the
phone alone computes every step's pass from the template's JPEG and fetches no shard; a split
that leaves each step's first block to the phone starts each step's pass afresh and fetches the
rest; both give the lossless level's image."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sakura.edge_client import COMPUTE, EdgeSession
from sakura.edge_client.planning import PlanContext
from sakura.edge_client.policy import HybridPolicy
from sakura.platform.images import load_image
from sakura.platform.library import TemplateLibrary
from sakura.platform.models import load_model
from sakura.platform.models.pipelines.tiny import export
from sakura.platform.store import open_store
from tests.edge_servers import ApiServer
from tests.helpers import make_builder, publish
from tests.unit.edge_client._told_costs import DEAR_S, ToldCosts

STEPS, TEMPLATE, PHOTO = 2, "brick", "skimage:coffee"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return export("tiny-kontext", tmp_path_factory.mktemp("kontext") / "tiny-kontext")


@pytest.fixture(scope="module")
def server(folder, tmp_path_factory) -> Iterator[ApiServer]:
    uri = f"file://{tmp_path_factory.mktemp('kontext-lib')}"
    publish(TemplateLibrary(open_store(uri)), make_builder(str(folder), steps=STEPS), uri, TEMPLATE, "skimage:brick")
    with ApiServer(uri) as api:
        yield api


@pytest.fixture(scope="module")
def phone(folder):
    return load_model(str(folder), phone=True)


@pytest.fixture(scope="module")
def lossless(server, phone) -> np.ndarray:
    with EdgeSession(server.url, models=lambda _: phone) as session:
        return session.edit(load_image(PHOTO), TEMPLATE, 1, "fixed-full").image


class FirstBlockOfEachStep(HybridPolicy):
    """A split set in advance, so that no timing decides it: each step's first block is the phone's,
    and the rest of the step is fetched at ``full``, from its top down while the phone computes
    the first (the fetch stage's probe, which asks ``take_back``), then from the bottom up. A
    step's first block is never taken back: the loop also offers it back while the model runs
    the step before, and whether the model reached it first is this machine's timing."""

    def choose(self, ctx: PlanContext) -> str:
        return COMPUTE if ctx.can_compute and ctx.index % ctx.pass_shards == 0 else "full"

    def take_back(self, ctx: PlanContext, top: int) -> str | None:
        return None if top % ctx.pass_shards == 0 else "full"


def test_the_phone_alone_computes_every_steps_pass_and_fetches_no_shard(server, phone, lossless):
    with EdgeSession(server.url, models=lambda _: phone) as session:
        result = session.edit(load_image(PHOTO), TEMPLATE, 1, "on-device")
    shards = phone.kv_geometry(STEPS).keys
    assert len(shards) == STEPS * phone.info().layers
    assert result.computed == list(range(len(shards))) and result.bytes == 0
    assert np.array_equal(result.image, lossless)


def test_each_steps_pass_starts_afresh_where_the_phone_takes_its_first_block(server, phone, lossless):
    """The phone is told each step's first block is cheap and every other dear, so no late
    download is computed instead (this machine's speed must not decide which blocks are whose)."""
    layers = phone.info().layers
    with EdgeSession(server.url, models=lambda _: phone) as session:
        session.compute_model = ToldCosts([0.001 if i % layers == 0 else DEAR_S for i in range(STEPS * layers)])
        result = session.edit(load_image(PHOTO), TEMPLATE, 1, FirstBlockOfEachStep())
    assert result.computed == [step * layers for step in range(STEPS)], result.levels
    assert result.levels.count("full") == STEPS * (layers - 1) and result.bytes > 0
    assert np.array_equal(result.image, lossless)
