"""The state of one log read so far: reader, folder and log-level tallies.

:class:`Replay` is what ``tools/replay``, ``eventlog append`` (its sidecar)
and ``eventlog follow`` keep: it reads complete lines from where it stopped,
names bad lines, notices a torn tail, and hands events to a :class:`Folder`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import IO, Any

from eventlog.events import Event
from eventlog.fold import Folder, FoldResult
from eventlog.reader import Reader, iter_lines

#: Called with (lines read, bytes read) every so often during a long read.
Progress = Callable[[int, int], None]


class BadLine(Exception):
    """A bad line met in strict mode."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class Replay:
    """One log, folded up to ``offset`` (always the end of a complete line)."""

    def __init__(self, folder: Folder, assume_tz: tzinfo | None = None) -> None:
        self.folder = folder
        self.reader = Reader(assume_tz)
        self.line = 0
        self.offset = 0
        self.events = 0
        self.bad_lines: list[dict[str, Any]] = []
        self.torn_tail = False
        self.last_ts: str | None = None
        self.last_at: datetime | None = None

    def feed(self, f: IO[bytes], progress: Progress | None = None, strict: bool = False) -> None:
        """Fold every complete line of ``f`` from ``offset`` on; note a torn tail.

        With ``strict``, the first bad line raises :class:`BadLine` instead.
        """
        decode = self.reader.decode
        fold = self.folder.fold
        line = self.line
        events = 0
        self.torn_tail = False
        for raw, end, complete in iter_lines(f, self.offset):
            if not complete:
                self.torn_tail = True
                break
            line += 1
            self.offset = end
            decoded = decode(raw, line)
            if isinstance(decoded, str):
                if strict:
                    self.line = line
                    raise BadLine(line, decoded)
                self.bad_lines.append({"line": line, "reason": decoded})
                continue
            ev, at = decoded
            fold(ev, line, at)
            events += 1
            self.last_ts = ev.ts
            self.last_at = at
            if progress is not None and not line & 0xFFFF:
                progress(line, end)
        self.line = line
        self.events += events

    def apply(self, ev: Event, at: datetime) -> FoldResult:
        """Fold one event that is about to be written as the next line."""
        self.line += 1
        self.reader.last_seq = ev.seq if ev.seq is not None else self.line
        result = self.folder.fold(ev, self.line, at)
        self.events += 1
        self.last_ts = ev.ts
        self.last_at = at
        return result

    def dump(self, log: str, at: datetime | None = None, at_text: str | None = None) -> dict[str, Any]:
        """The dump of spec/OUTPUTS.md as of ``at`` (default: the last event's time)."""
        if at is None:
            at, at_text = self.last_at, self.last_ts
        head: dict[str, Any] = {
            "log": log,
            "as_of": at_text,
            "events": self.events,
            "bad_lines": list(self.bad_lines),
            "torn_tail": self.torn_tail,
        }
        head.update(self.folder.view(at if at is not None else _EPOCH))
        return head


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
