"""What the transport's bytes pass through on their way in: the real network, or an emulation.

The transport calls :meth:`Link.on_request` before each request and :meth:`Link.on_bytes` after
each chunk it reads; an emulated link sleeps there to pace delivery. The real link does nothing.
"""

from __future__ import annotations

from typing import Protocol


class Link(Protocol):
    def on_request(self) -> None:
        """Called before a request is sent (an emulated link adds its round-trip delay)."""

    def on_bytes(self, nbytes: int) -> None:
        """Called after ``nbytes`` of a response body were read (an emulated link paces them)."""

    def close(self) -> None:
        """The transport closed: nothing waits on the link any more (an emulated link wakes its sleepers)."""


class DirectLink:
    """The network as it is."""

    def on_request(self) -> None:
        return None

    def on_bytes(self, nbytes: int) -> None:
        return None

    def close(self) -> None:
        return None
