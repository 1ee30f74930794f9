"""Build progress: one redrawn line per template on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, names: list[str], stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.names = names
        self.state = {n: "queued" for n in names}
        self.done: set[str] = set()
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self._drawn = 0

    def update(self, name: str, state: str, *, done: bool = False) -> None:
        self.state[name] = state
        if done:
            self.done.add(name)
        if self.tty:
            self._redraw()
        else:
            print(f"[{time.perf_counter() - self.start:7.1f}s] {name}: {state}", file=self.stream, flush=True)

    def _redraw(self) -> None:
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F")
        width = 20
        for n in self.names:
            filled = width if n in self.done else (width // 2 if self.state[n].startswith("building") else 0)
            self.stream.write(f"\x1b[2K{n:24s} [{'#' * filled}{'.' * (width - filled)}] {self.state[n]}\n")
        self._drawn = len(self.names)
        self.stream.flush()

    def close(self) -> None:
        if not self.tty:
            print(f"[{time.perf_counter() - self.start:7.1f}s] done: {len(self.done)}/{len(self.names)}", file=self.stream, flush=True)
