"""The session's on-device models, each loaded once, on a thread of its own.

Loading a model (weights from flash into memory) takes seconds on a phone and cannot be
interrupted halfway. An edit waiting for it still returns on cancel at once
(:class:`~sakura.edge_client.errors.EditCancelled`): the load goes on in the background and the
next edit that needs the model takes what it made, or waits for it; no model is ever loaded twice
at once. A load that fails is forgotten, so the next edit tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from sakura.edge_client.errors import EditCancelled
from sakura.platform.models import ModelAdapter

#: How often an edit waiting for a model looks at its cancel event (it wakes at once when the
#: load ends): well under the half second an app may expect a cancel to take.
CANCEL_POLL_S = 0.02


class ModelLoads:
    """The models a session has loaded or is loading, by name."""

    def __init__(self, load: Callable[[str], ModelAdapter]) -> None:
        """``load``: the session's ``models`` (a model name -> this device's model)."""
        self._load = load
        self._loads: dict[str, Future[ModelAdapter]] = {}
        self._lock = threading.Lock()

    def get(self, name: str, cancel: threading.Event | None = None) -> ModelAdapter:
        """The model called ``name``, loaded now unless it is loaded or loading already; raises
        :class:`EditCancelled` as soon as ``cancel`` is set while it waits for the load."""
        with self._lock:
            future = self._loads.get(name)
            if future is None:
                future = self._loads[name] = Future()
                threading.Thread(target=self._run, args=(name, future), name="sakura-model-load",
                                 daemon=True).start()
        if cancel is None:
            return future.result()
        while True:
            if cancel.is_set():
                raise EditCancelled("the edit was cancelled while its model loaded (the load goes on)")
            try:
                return future.result(timeout=CANCEL_POLL_S)
            except TimeoutError:
                continue

    def _run(self, name: str, future: Future[ModelAdapter]) -> None:
        try:
            adapter = self._load(name)
        except BaseException as exc:  # handed to every edit waiting for it; the next one tries again
            with self._lock:
                if self._loads.get(name) is future:
                    del self._loads[name]
            future.set_exception(exc)
        else:
            future.set_result(adapter)
