"""A model's forward, paused after each of some modules: block-by-block results from a forward
that runs all its blocks in one call (a pipeline's transformer, whose loop is not ours to copy).

The forward runs in a worker thread. A forward hook on each module hands what it read to the
caller and waits; the caller's next ``next()`` lets the forward go on to the next module, and
closing the generator makes the waiting hook raise, which abandons the forward there. So only
one of the two threads computes at a time, and the work stops where the caller stops. The hooks
act only in the worker thread: the same model running elsewhere meanwhile (replay) never sees them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

import torch

from sakura.platform.errors import ModelError

T = TypeVar("T")
_ITEM, _DONE, _ERROR = "item", "done", "error"


class _Abandoned(Exception):
    """Raised in the worker's forward when the caller stops asking for blocks."""


def stream_after_modules(
    modules: Sequence[torch.nn.Module], forward: Callable[[], Any], read: Callable[[dict[str, Any], Any], T]
) -> Generator[T, None, None]:
    """Run ``forward()`` in a worker thread and yield ``read(kwargs, output)`` after each of
    ``modules`` runs, in order; the forward goes on only when the next item is asked for."""
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue()
    resume = threading.Semaphore(0)
    stopping = threading.Event()
    worker = threading.Thread(target=lambda: _work(forward, handoff), name="sakura-template-kv", daemon=True)

    def after(module: torch.nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> None:
        if threading.current_thread() is not worker:
            return
        handoff.put((_ITEM, read(kwargs, output)))
        resume.acquire()
        if stopping.is_set():
            raise _Abandoned

    handles = [module.register_forward_hook(after, with_kwargs=True) for module in modules]
    try:
        worker.start()
        for i in range(len(modules)):
            if i:
                resume.release()
            kind, value = handoff.get()
            if kind == _ERROR:
                raise ModelError(f"computing template KV failed: {type(value).__name__}: {value}") from value
            if kind == _DONE:
                raise ModelError(f"the forward ended after {i} of {len(modules)} blocks")
            yield value
    finally:
        stopping.set()
        resume.release()
        if worker.ident is not None:  # started
            worker.join()
        for handle in handles:
            handle.remove()


def _work(forward: Callable[[], Any], handoff: queue.Queue) -> None:
    try:
        forward()
        handoff.put((_DONE, None))
    except _Abandoned:
        pass
    except BaseException as exc:  # handed to the caller's thread, which raises it as a ModelError
        handoff.put((_ERROR, exc))
