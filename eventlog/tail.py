"""The end of a log past its last committed line: whether the next append cuts it, and why not.

A writer that dies mid-write leaves at most an unfinished batch (complete lines
of a batch whose last line is missing) and a torn last line that starts like a
log line. The next append cuts exactly that. Anything else at the end of a file
is no writer's leftover (a binary, a text, more than a line's worth without a
line end): no append cuts it, every append is refused, and only a person can
clear it. :meth:`Tail.refusal` is that rule, written once: the appender refuses
by it (``eventlog.appender.EventLog._cuttable``), and a replay keeps its verdict
(:attr:`eventlog.replay.Replay.stuck_tail`) for every view that speaks of the
torn tail (``status``, ``serve``, the Prometheus file). An unfinished batch is
:class:`Uncommitted`, whose words (:meth:`Uncommitted.words`) the appender's
note and every view share: its complete lines are held, never applied, and
counted nowhere else (neither events nor bad lines), so the views name them.
"""

from __future__ import annotations

import os
from typing import IO, NamedTuple

from eventlog.reader import MAX_LINE_BYTES

#: How much of the end a verdict reads: a line's worth and one byte more (a longer torn line is no line).
WINDOW = MAX_LINE_BYTES + 1


class Uncommitted(NamedTuple):
    """The unfinished batch at the end of a log: how many complete lines of it are there, its first ``seq``,
    the ``seq`` its last line was to have, the number of its first line, and whether a torn line follows it."""

    lines: int
    first_seq: int
    end: int
    line: int
    torn_after: bool = False

    @property
    def last_seq(self) -> int:
        """The ``seq`` of its last complete line."""
        return self.first_seq + self.lines - 1

    def words(self) -> str:
        """What it is: ``an unfinished batch of N complete line(s) (seq A..B, since line L) of a batch that was to
        end at seq E``."""
        return (f"an unfinished batch of {self.lines} complete line(s) (seq {self.first_seq}..{self.last_seq}, "
                f"since line {self.line}) of a batch that was to end at seq {self.end}")


class Stuck(NamedTuple):
    """A tail no append cuts: why (words that follow the log's name), where the committed lines end, the size."""

    why: str
    start: int
    size: int


class Tail(NamedTuple):
    """The bytes of a file past ``start`` (the end of its last committed line), up to ``size``.

    ``last`` holds the last of them, :data:`WINDOW` at most.
    """

    start: int
    size: int
    last: bytes

    @property
    def torn(self) -> bytes:
        """The torn last line: what follows the last line end (of the bytes read)."""
        return self.last[self.last.rfind(b"\n") + 1:]

    @property
    def has_line_end(self) -> bool:
        """Whether the bytes read hold a line end (complete lines past ``start``: an unfinished batch)."""
        return b"\n" in self.last

    def refusal(self) -> str | None:
        """Why no append may cut this tail (words that follow the log's name); None: the next append cuts it.

        Cut are an unfinished batch and a torn last line of at most
        :data:`~eventlog.reader.MAX_LINE_BYTES` (1 MiB) that starts with ``{``
        and holds no NUL byte; anything else is left as it is.
        """
        if not self.has_line_end and self.size - self.start > MAX_LINE_BYTES:
            return (f"ends with {self.size - self.start} bytes without a line end, more than any line (1 MiB) "
                    "a writer could have left: not a torn tail")
        torn = self.torn
        if torn and (not torn.startswith(b"{") or b"\0" in torn):
            return (f"ends with {len(torn)} bytes that are not the start of a log line ({torn[:16]!r}...): "
                    "it does not look like an event log")
        return None

    def stuck(self) -> Stuck | None:
        """This tail as a :class:`Stuck` when no append may cut it, else None."""
        why = self.refusal()
        return None if why is None else Stuck(why, self.start, self.size)


def read_tail(f: IO[bytes], start: int, size: int | None = None) -> Tail:
    """The :class:`Tail` of ``f`` past ``start``; ``size`` None: up to the end of the file as it is now."""
    if size is None:
        size = f.seek(0, os.SEEK_END)
    window = min(max(size - start, 0), WINDOW)
    f.seek(size - window)
    return Tail(start, size, f.read(window))


__all__ = ["WINDOW", "Stuck", "Tail", "Uncommitted", "read_tail"]
