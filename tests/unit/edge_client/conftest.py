"""A fault-injecting proxy in front of the shard API (the library and API fixtures: ``tests/unit/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.edge_servers import FaultProxy


@pytest.fixture
def proxy(api) -> Iterator[FaultProxy]:
    with FaultProxy(api.port) as p:
        yield p
