"""Kept-alive HTTP connections: a pool whose idle connections expire, and a watchdog.

Servers close idle keep-alive connections (uvicorn after 5 s), so a pooled connection is used
only while younger than ``idle_s``, and the transport retries a reused one that fails before any
response byte on a fresh connection. Socket timeouts bound each ``recv``, not a request: a
server that drips a byte a second, or an edit cancelled while a thread waits in
``getresponse()``, would hold that thread for as long as the server likes. The watchdog asks
every request in flight, every ``poll_s``, whether it should stop (deadline, cancel, the pool
closing); if so it shuts the socket down, the blocked call returns at once, and the request
knows why (:attr:`Watch.reason`).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator

from sakura.edge_client._http.urls import Origin
from sakura.edge_client.errors import TransportError

#: Returns why a request must stop ("cancelled", "deadline", ...), or None to let it run.
StopCheck = Callable[[], "str | None"]
CLOSED = "closed"


class Watch:
    """One request in flight, as the watchdog sees it."""

    def __init__(self, conn: http.client.HTTPConnection, check: StopCheck) -> None:
        self.conn, self.check = conn, check
        self.reason: str | None = None
        self._done = False
        self._lock = threading.Lock()

    def abort(self, reason: str) -> None:
        with self._lock:
            if self._done or self.reason is not None:
                return
            self.reason = reason
            sock = self.conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> bool:
        """The request is over: True if the connection was never aborted (it may be pooled)."""
        with self._lock:
            self._done = True
            return self.reason is None


#: What becomes of a connection once its response is over (:meth:`Lane.finish`).
POOL, CLOSE, HANDED = "pool", "close", "handed"


class Lane:
    """A connection whose response is streaming, on which the next request may be sent at once
    (HTTP/1.1 pipelining): that request's response then follows this one's bytes on the same TCP
    stream. Sent on a second connection instead, its first packets meet a bottleneck queue that
    this response keeps full and are dropped (measured on a tbf link: its first byte came 10-30 ms
    after this response's last). One request may wait behind the
    response (``http.client`` allows no more); it reads its own once this one is read whole."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._whole = False  # the response ahead was read whole: the next one is there to read
        self._rider = False  # a request was sent behind it
        self._rider_left = False  # ... and its sender stopped waiting (its response is never read)

    def board(self, send: Callable[[http.client.HTTPConnection], None]) -> bool:
        """Send a request behind the response (``send(conn)``); False if this lane takes none."""
        with self._lock:
            if self._rider or self._done.is_set():
                return False
            try:
                send(self.conn)
            except (http.client.CannotSendRequest, OSError):
                return False  # the reader of the response ahead finds the connection broken, if it is
            self._rider = True
            return True

    def wait_turn(self, check: StopCheck, poll_s: float) -> tuple[str | None, bool]:
        """Wait until the response ahead is over: (why the waiting request must stop, or None;
        whether the connection is now the rider's, its response next on it). A rider that stops
        while the response ahead streams leaves the connection to be closed after it."""
        while not self._done.wait(poll_s):
            reason = check()
            if reason is not None:
                with self._lock:
                    if not self._done.is_set():
                        self._rider_left = True
                        return reason, False
        return check(), self._whole

    def finish(self, whole: bool) -> str:
        """The response is over (``whole``: read to its end on a connection fit to reuse): whether
        the connection goes back to the pool, is closed, or was handed to the request behind it."""
        with self._lock:
            self._whole = whole
            self._done.set()
            if not self._rider:
                return POOL if whole else CLOSE
            return HANDED if whole and not self._rider_left else CLOSE


class ConnectionPool:
    def __init__(self, *, timeout_s: float, idle_s: float, poll_s: float = 0.02) -> None:
        self.timeout_s, self.idle_s, self.poll_s = timeout_s, idle_s, poll_s
        self._idle: dict[Origin, list[tuple[http.client.HTTPConnection, float]]] = {}
        self._lanes: dict[Origin, Lane] = {}  # per origin, the latest response streaming
        self._watches: set[Watch] = set()
        self._watchdog: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        return self._closed

    def take(self, origin: Origin, *, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        """A connection to ``origin`` and whether it was reused; expired idle ones are closed."""
        expired, reused = [], None
        now = time.monotonic()
        with self._lock:
            if self._closed:
                raise TransportError("the transport is closed")
            pool = self._idle.get(origin, [])
            while pool and reused is None:
                conn, since = pool.pop()
                if fresh or now - since > self.idle_s:
                    expired.append(conn)
                else:
                    reused = conn
        for conn in expired:
            conn.close()
        if reused is not None:
            return reused, True
        cls = http.client.HTTPSConnection if origin[0] == "https" else http.client.HTTPConnection
        return cls(origin[1], origin[2], timeout=self.timeout_s), False

    def open_lane(self, origin: Origin, conn: http.client.HTTPConnection) -> Lane:
        """``conn``'s response to a shard request is streaming: the next one may ride behind it."""
        lane = Lane(conn)
        with self._lock:
            self._lanes[origin] = lane
        return lane

    def board(self, origin: Origin, send: Callable[[http.client.HTTPConnection], None]) -> Lane | None:
        """The lane to ``origin`` on which ``send`` just sent a request, or None (none takes one)."""
        with self._lock:
            lane = None if self._closed else self._lanes.get(origin)
        return lane if lane is not None and lane.board(send) else None

    def give_back(self, origin: Origin, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.setdefault(origin, []).append((conn, time.monotonic()))
                return
        conn.close()  # closed while this request ran: never pooled again

    def close(self) -> None:
        """Close idle connections and stop every request in flight (they raise TransportError)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
            self._lanes.clear()
            watches = list(self._watches)
        for conns in idle.values():
            for conn, _ in conns:
                conn.close()
        for watch in watches:
            watch.abort(CLOSED)

    @contextlib.contextmanager
    def watch(self, conn: http.client.HTTPConnection, check: StopCheck) -> Iterator[Watch]:
        """Watch ``conn`` while the body of the ``with`` runs a request on it."""
        watch = Watch(conn, check)
        with self._lock:
            self._watches.add(watch)
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._run, name="sakura-watchdog", daemon=True)
                self._watchdog.start()
        try:
            yield watch
        finally:
            with self._lock:
                self._watches.discard(watch)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._watches:
                    self._watchdog = None
                    return
                watches = list(self._watches)
            for watch in watches:
                reason = CLOSED if self._closed else watch.check()
                if reason is not None:
                    watch.abort(reason)
            time.sleep(self.poll_s)
