"""Build progress: a tqdm bar over the templates on a terminal, one plain log line per change
otherwise (no cursor codes in a log file or a CI transcript)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm


class Progress:
    def __init__(self, names: list[str], stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.total = len(names)
        self.done: set[str] = set()
        self.start = time.perf_counter()
        interactive = stream.isatty()
        self._bar = tqdm(total=self.total, unit="template", file=stream, dynamic_ncols=True) if interactive else None

    def note(self, message: str) -> None:
        """A line about the whole build (e.g. while Ray starts)."""
        self._write(message)

    def update(self, name: str, state: str, *, done: bool = False) -> None:
        if done and name not in self.done:
            self.done.add(name)
            if self._bar is not None:
                self._bar.update(1)
        if self._bar is None or done:
            self._write(f"{name}: {state}")
        if self._bar is not None:
            self._bar.set_postfix_str(f"{name}: {state}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            self._write(f"done: {len(self.done)}/{self.total}")

    def _write(self, message: str) -> None:
        line = f"[{time.perf_counter() - self.start:7.1f}s] {message}"
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)
