"""A progress bar on standard error (one line per update when it is not a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done, note)`` redraws ``label [#####.....] done/total note  elapsed``.

    Parameters
    ----------
    total : int
        The count that finishes the bar.
    label : str
        Printed before the bar.
    stream : file, optional
        Standard error by default; on a terminal the bar redraws in place, elsewhere
        a line is written at most every 10 seconds, and at the end.
    width : int
        Characters of the bar.
    """

    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 width: int = 30):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.start = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self._last_line = 0.0

    def update(self, done: int, note: str = "") -> None:
        """Show ``done`` of ``total`` finished, with ``note`` after the bar."""
        self.done = min(int(done), self.total)
        now = time.monotonic()
        finished = self.done == self.total
        if not self.tty and not finished and now - self._last_line < 10:
            return
        self._last_line = now
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        line = (f"{self.label} [{bar}] {self.done}/{self.total} {note}"
                f"  {now - self.start:.0f}s")
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if finished else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def advance(self, note: str = "") -> None:
        """One more finished."""
        self.update(self.done + 1, note)

    def message(self, text: str) -> None:
        """``text`` on a line of its own, at once (the bar is redrawn by the next update)."""
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
        self.stream.flush()
