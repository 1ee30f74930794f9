"""The first shard, asked for together with the preamble.

A fresh session knows neither the template's version behind an alias nor its level names until the
preamble arrives, so its first shard request would leave a round trip after the preamble's last
byte: a round trip of idle link. Instead it asks at once for shard 0 at the template's smallest
level (:data:`~sakura.platform.http_api.SMALLEST_LEVEL`), and keeps the answer only if it is what
the manifest says it is (version, level, length and sha256); otherwise the shard is fetched as any
other. Only a session without a rate estimate does this (an adaptive policy then starts at the
smallest level anyway).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sakura.edge_client._http.deadlines import CancelFlag
from sakura.edge_client._http.transport import HttpTransport, Reply
from sakura.edge_client._shard_hashes import ShardHashes
from sakura.edge_client.errors import EdgeError
from sakura.platform import http_api
from sakura.platform.errors import SakuraError
from sakura.platform.integrity import matches
from sakura.platform.manifest import PhoneManifest

_POLL_S = 0.02


@dataclass(frozen=True)
class FirstShardBytes:
    level: str
    data: bytes
    first_byte_at: float  # the transport's clock (time.monotonic), as the link meter's
    arrived_at: float


class FirstShard:
    """Shard 0 of ``template`` at ``version`` (a number or an alias), at its smallest level, in flight."""

    def __init__(self, transport: HttpTransport, template: str, version: int | str) -> None:
        self.requested_at = time.monotonic()  # the transport's clock, as every time here
        self._stop = threading.Event()
        self._done = threading.Event()
        self._reply: Reply | None = None
        self._arrived_at = 0.0
        path = http_api.shard_path(template, version, 0, http_api.SMALLEST_LEVEL)  # type: ignore[arg-type]
        self._thread = threading.Thread(target=self._run, args=(transport, path), name="sakura-first-shard",
                                        daemon=True)
        self._thread.start()

    def _run(self, transport: HttpTransport, path: str) -> None:
        try:
            self._reply = transport.get(path, cancel=self._stop, limit=http_api.MAX_BUNDLED_BYTES, ride=True)
        except (EdgeError, SakuraError, OSError):
            self._reply = None  # fetched again the ordinary way
        finally:
            self._arrived_at = time.monotonic()
            self._done.set()

    def smallest_level(self, manifest: PhoneManifest) -> str | None:
        """The level the server sends as the smallest, if this phone reads it (else the shard is useless)."""
        level = manifest.levels[0].name
        return level if level in manifest.readable_levels() else None

    def take(self, manifest: PhoneManifest, hashes: ShardHashes, cancel: CancelFlag) -> FirstShardBytes | None:
        """The shard once it has arrived, if it is the one ``manifest`` lists; None otherwise."""
        while not self._done.wait(_POLL_S):
            if cancel.is_set():
                self.close()
                return None
        reply, level = self._reply, self.smallest_level(manifest)
        if reply is None or reply.first_byte_at is None or level is None:
            return None
        location = manifest.shards[0].levels[level]
        genuine = (reply.headers.get("x-sakura-version") == str(manifest.version)
                   and reply.headers.get(http_api.SHARD_LEVEL.lower()) == level
                   and matches(reply.body, hashes.sha256(0, level), location.length))
        if not genuine:
            return None
        return FirstShardBytes(level, reply.body, reply.first_byte_at, self._arrived_at)

    def close(self) -> None:
        """Stop the request if it is still running (the edit ended or no longer wants it)."""
        self._stop.set()
        self._thread.join(timeout=1.0)
