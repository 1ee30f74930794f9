"""Telling an app's ``on_progress`` callback what the pipeline records in the timeline.

The stages call :meth:`ProgressTeller.tell` right after they record a shard's step in its
:class:`~sakura.edge_client.timeline.ShardTiming`, and the event is read from that record: the
callback and the timeline never disagree. Callbacks run on the stage's thread (a download, the
decoder, or the caller's own for computed shards), one at a time, and none once the edit has
stopped: :meth:`close` waits for one under way. What a callback raises is the stage's error, so
it stops the edit like any other, and the edit raises it; nothing is told after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sakura.edge_client.timeline import Progress, ProgressKind, Timeline

#: What ``EdgeSession.edit`` calls with each :class:`~sakura.edge_client.timeline.Progress` event.
ProgressCallback = Callable[[Progress], None]


class ProgressTeller:
    def __init__(self, callback: ProgressCallback | None, timeline: Timeline, clock: Callable[[], float],
                 stopped: Callable[[], bool]) -> None:
        """``stopped``: the edit failed or was cancelled (no event is told after that)."""
        self.callback, self.timeline, self.clock, self.stopped = callback, timeline, clock, stopped
        self._lock = threading.Lock()
        self._closed = False

    def tell(self, kind: ProgressKind, index: int) -> None:
        """Shard ``index`` was ``kind``; its timeline record says so already."""
        if self.callback is None:
            return
        timing = self.timeline.shards[index]
        with self._lock:
            if self._closed or self.stopped():
                return
            try:
                self.callback(Progress(kind, index, len(self.timeline.shards), timing.level, timing.source,
                                       timing.bytes, self.clock()))
            except BaseException:
                self._closed = True  # the edit is failing with it: nothing more to tell
                raise

    def close(self) -> None:
        """No event from now on: returns once a callback under way has."""
        with self._lock:
            self._closed = True
