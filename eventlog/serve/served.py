"""The log a server follows and writes: one folded state kept level with it, judgements, change notices.

:class:`Served` follows LOG in a thread with the same follower code as
``eventlog follow`` (:class:`eventlog.follow.Follower` for a file,
:class:`eventlog.jetstream.StreamFollower` for ``nats://``), so a read or a
decision costs no replay. Every read and every change of the folded state
happens under :attr:`Served.lock`; each change bumps :attr:`Served.version` and
calls the listeners (the HTTP side wakes its event streams with them).

Writes go through :attr:`Served.log`, a :class:`~eventlog.logs.Log` whose
``append`` is the log's own appender and whose ``state`` is the followed state,
caught up to what was just written: :func:`eventlog.runners.sessions.decide`
runs on it unchanged, so a decision's receipt is the one the CLI would print.

A judgement (the dump as of a time) costs O(entities): about 0.7 s on a log of
100,000 entities. One judged as of now is reused while the log has not moved and
it is younger than ``max_age_s``; past that, and for at most ``stale_s``, it is
answered while the next one is made in the background (:meth:`Served.judged`),
as ``follow``'s dump file is read while the next one is written. So many
readers cost one judgement a second and none of them waits for it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

import msgspec

from eventlog import clock, logs
from eventlog import follow as file_follow
from eventlog.appender import AppendError, AppendResult, BadInput, Conflict
from eventlog.clock import NOW, At, parse_at, zone_name
from eventlog.events import Event
from eventlog.fold import FoldResult
from eventlog.follow import Follower, judged
from eventlog.logs import (
    ClosedOnExit,
    Log,
    LogUnavailable,
    complete_lines,
    is_url,
    open_log,
    open_regular,
    password_note,
    printed,
)
from eventlog.prom import of_replay
from eventlog.reader import Reader, as_written, iter_blocks
from eventlog.replay import Progress, Replay, uncommitted_reason
from eventlog.runners import sessions as decisions
from eventlog.runners.common import BadLines, NamedBadLine, folder, naming
from eventlog.views import status as triage_of
from eventlog.views import status_of_missing
from projections.runner import Runner
from projections.triage import SHOWN, LogArg, Triage, dir_cmd, status_cmd
from projections.turns import Turns, turn_words

log = logging.getLogger("eventlog.serve")

#: A judgement as of now is reused this long while the log has not moved.
MAX_AGE_S = 1.0
#: A judgement as of now this young is answered while a newer one is made (the server's --tick).
STALE_S = 5.0
#: How long a write waits for the follower to see it (a stream delivers it asynchronously).
REACH_TIMEOUT_S = 10.0
#: Lines read per step of an event stream ...
TAIL_BATCH = 2000
#: ... and bytes: a step stops at the first block that reaches either (lines of up to 1 MiB would make 2,000 of
#: them 2 GB held by one stream until they are sent).
TAIL_BYTES = 4 << 20
#: ... read in blocks of this many bytes: a block of 1 MiB holds some 8,000 short lines, all of which a step took
#: and a reader that stopped reading held (2.7 MB each, review R11), past the 2,000 said above.
TAIL_READ = 64 << 10
#: Sessions whose bad lines a server remembers (:meth:`Served.named_by_bad_lines`); past it, it forgets them all.
NAMED_KEPT = 1024


class Unavailable(Exception):
    """The server cannot answer from its log now (503): the message says why."""


class ServedRunner(Runner):
    """The replay's projections, plus each session's turns (``GET .../turns/{turn_id}``)."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = Turns()

    def fold(self, ev: Event, line: int, at: datetime) -> FoldResult:
        """Fold as the replay does; what was applied also goes to the turns."""
        result = super().fold(ev, line, at)
        if result is None:
            self.turns.fold(ev, line, at)
        return result


@dataclass
class Judged:
    """The dump and the triage as of one time, at one version of the folded state, and what is derived from them.

    Both are judged at the same T, under the lock: the triage is ``status``'s own
    (:func:`eventlog.views.status`), so the console shows what ``status`` shows.
    """

    version: int
    made: float
    dump: dict[str, Any]
    triage: Triage
    _derived: dict[str, Any] = field(default_factory=dict)

    def status(self, every: bool = False) -> dict[str, Any]:
        """``status --json``: the triage with the first few items of each group (``every``: ``--all``)."""
        limit = None if every else SHOWN
        view: dict[str, Any] = self.derived(f"status-{limit}",
                                            lambda _dump: msgspec.to_builtins(self.triage.shown(limit)))
        return view

    def derived(self, name: str, make: Callable[[dict[str, Any]], Any]) -> Any:
        """``make(dump)``, made once per judgement."""
        if name not in self._derived:
            self._derived[name] = make(self.dump)
        return self._derived[name]


def _waiting(dump: dict[str, Any]) -> list[dict[str, Any]]:
    """The sessions of a dump that wait for a person's decision (the console links them)."""
    items = dump["sessions"]["items"]
    return [{"session_id": sid, **item} for sid, item in items.items() if decisions.needs_decision(item)]


class Served:
    """One log, followed in a thread; what the HTTP routes read and write."""

    def __init__(self, target: str, *, assume_tz: tzinfo | None = None, max_age_s: float = MAX_AGE_S,
                 stale_s: float = STALE_S) -> None:
        #: LOG as given (what is opened) and as printed (every answer, message and command: no password).
        self.target, self.name = target, printed(target)
        #: The zone of times written without an offset (``--assume-tz``): the log's lines and a POST's alike.
        self.assume_tz = assume_tz
        #: Now, judged in ``assume_tz``'s zone when given (``--assume-tz``), as the CLI judges it.
        self.now = parse_at(None, assume_tz)
        #: LOG in the commands it prints, with ``--assume-tz`` when given.
        self.log_arg = LogArg(self.name, zone_name(assume_tz))
        self.stream = is_url(target)
        self.max_age_s = max_age_s
        self.stale_s = stale_s
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        #: Bumped on every change of the folded state (and when the log is lost).
        self.version = 0
        self.ready = False
        self.lost: str | None = None
        #: Why the log cannot be answered from, and since when (:meth:`trouble`).
        self._trouble: tuple[str, str] | None = None
        self._trouble_lock = threading.Lock()
        self.stop_event = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._judge_lock = threading.Lock()
        self._judged: dict[At, Judged] = {}
        self._now: Judged | None = None
        self._refresh_lock = threading.Lock()
        self._refreshing = False
        self._write_lock = threading.Lock()
        #: Why the log refused the last write (said once in the server's log); None once it takes one.
        self._refused: str | None = None
        self._thread: threading.Thread | None = None
        self.writer: Log = open_log(target, assume_tz=assume_tz)
        self.follower: Any
        if self.stream:
            self._follow_log = open_log(target, ServedRunner, assume_tz=assume_tz)
            self.follower = _stream_follower(self._follow_log, self)
        else:
            self.follower = _FileFollower(target, self, assume_tz)
        self._tail_log: Log | None = None
        self._tail_lock = threading.Lock()
        #: session id -> (the replay's list of bad lines, how many it held, those that name the session)
        self._named: dict[str, tuple[list[Any], int, list[NamedBadLine]]] = {}
        self.log: Log = ServedLog(self)

    # -- following ---------------------------------------------------------------

    def start(self) -> None:
        """Start following in a thread (``ready`` once the log is read)."""
        self._thread = threading.Thread(target=self._follow, name="eventlog-serve-follow", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop following and close the log's connections."""
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for each in (self.writer, getattr(self, "_follow_log", None), self._tail_log):
            if each is not None:
                try:
                    each.close()
                except Exception:  # closing on the way out; the connection may be gone
                    log.debug("closing %s failed", self.name, exc_info=True)

    def _follow(self) -> None:
        try:
            if self.stream:
                from eventlog.jetstream import follow as follow_stream

                follow_stream(self.follower, self._caught_up, self._note, self.stop_event)
            else:
                file_follow.follow(self.follower, self._caught_up, self._note, self.stop_event)
        except OSError as err:  # LogUnavailable too
            self._lose(f"lost {self.name}: {getattr(err, 'strerror', None) or err}")
        except Exception as err:  # said on 503 and in the server's log, never silent
            log.exception("following %s failed", self.name)
            self._lose(f"following {self.name} failed: {err}")

    def _caught_up(self, _follower: Any) -> None:
        if not self.ready:
            self.ready = True
            self.changed()

    def _note(self, note: str) -> None:
        log.warning("%s", note)

    def _lose(self, why: str) -> None:
        log.error("%s", why)
        self.lost = why
        self.changed()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from any thread) after every change."""
        self._listeners.append(listener)

    def changed(self) -> None:
        """The folded state changed: bump the version, wake the waiters and the listeners."""
        with self._changed:
            self.version += 1
            self._changed.notify_all()
        self.trouble()  # a problem's "since" is when it began, not when someone first asked
        for listener in list(self._listeners):
            listener()

    def problem(self) -> str | None:
        """Why the server cannot answer from its log now (None: it can)."""
        if self.lost:
            return self.lost
        if self.stream:  # the state may be behind: said, never answered from (the follower reads on once it is back)
            down, link = self.follower.unreachable, self.follower.log
            if down is not None or link.reconnecting:
                reason: str = down.reason if down is not None else link.why_down()
                return (f"{self.name}: the server is unreachable ({reason}); the state stays as of seq "
                        f"{self.replay.reader.last_seq} until it is back")
        if not self.ready:
            return f"{self.name}: still reading the log"
        if getattr(self.follower, "missing", False):  # nothing, or no file, at its path
            why: str = self.follower.why_missing()
            return why
        return None

    def trouble(self) -> tuple[str, str] | None:
        """:meth:`problem` and since when (ISO 8601, this server's clock): when it was first seen; None: no problem.

        Noted on every change of the log (a file that goes away is one) and on every ask.
        """
        why = self.problem()
        with self._trouble_lock:
            if why is None:
                self._trouble = None
            elif self._trouble is None or self._trouble[0] != why:
                self._trouble = (why, clock.now().isoformat())
            return self._trouble

    def check(self) -> None:
        """Unavailable when the server cannot answer from its log now."""
        why = self.problem()
        if why is not None:
            raise Unavailable(why)

    def reach(self, seq: int) -> None:
        """Make the folded state include ``seq`` (just written): a file is read now, a stream is waited for."""
        with self._changed:
            if not self.stream:
                self.follower.catch_up()
                return
            if not self._changed.wait_for(lambda: self.replay.reader.last_seq >= seq or self.problem() is not None,
                                          REACH_TIMEOUT_S) or self.replay.reader.last_seq < seq:
                raise Unavailable(self.problem() or f"{self.name}: seq {seq} was written but not seen by the follower "
                                  f"within {REACH_TIMEOUT_S:g} s")

    def catch_up(self) -> None:
        """Fold what the log holds now (a file: read it; a stream: wait for its last message)."""
        if not self.stream:
            with self.lock:
                self.follower.catch_up()
            return
        try:
            with self._write_lock:
                info = self.writer.info()  # type: ignore[attr-defined]
        except LogUnavailable as err:  # the server went away meanwhile
            raise Unavailable(f"{self.name}: {err}") from err
        if info is not None:
            self.reach(int(info.state.last_seq))

    @property
    def replay(self) -> Replay:
        """The folded state (read it under :attr:`lock`)."""
        replay: Replay = self.follower.replay
        return replay

    # -- reading -----------------------------------------------------------------

    def judged(self, at: At = NOW, *, wait: bool = False) -> Judged:
        """The dump as of ``at`` (a judgement), made at most once per version and time.

        As of now (any ``at`` that is now: judged as :attr:`now`, in the zone of
        ``--assume-tz`` when given): one younger than ``max_age_s`` of the current version is
        reused. An older one (or one of an older version), younger than
        ``stale_s``, is answered at once while a new one is made in the
        background, unless ``wait``: then the caller waits for a new one. So a
        reader never waits for a judgement while others keep it fresh; its
        ``as_of`` says when it was made.
        """
        self.check()
        if at.live:
            j = self._now
            if j is not None and not wait:
                age = time.monotonic() - j.made
                if j.version == self.version and age < self.max_age_s:
                    return j
                if age < self.stale_s:
                    self._refresh()
                    return j
            return self._judge_now(wait=True)
        with self._judge_lock:
            j = self._judged.get(at)
            if j is None or j.version != self.version:
                j = self._judge(at)
                self._judged = {at: j}
            return j

    def _judge(self, at: At) -> Judged:
        with self.lock:
            version = self.version
            replay = self.replay
            when, text = at.resolve(replay.last_at, replay.last_ts)
            pinned = At(when, text, log=when is None)  # one T for the dump and the triage, read once
            dump = judged(self.follower, pinned)
            triage = triage_of(replay, self.name, pinned, getattr(self.follower, "vanished", None), live=at.live)
        return Judged(version, time.monotonic(), dump, triage)

    def _judge_now(self, wait: bool) -> Judged:
        """A judgement as of now of the current version, younger than ``max_age_s`` (made if needed)."""
        with self._judge_lock:
            j = self._now
            if j is None or j.version != self.version or time.monotonic() - j.made >= self.max_age_s:
                j = self._judge(self.now)
                j.status()  # made here, not by the reader who comes next
                j.derived("waiting", _waiting)
                self._now = j
            return j

    def _refresh(self) -> None:
        """Make a new judgement as of now in the background (one at a time)."""
        with self._refresh_lock:
            if self._refreshing:
                return
            self._refreshing = True

        def run() -> None:
            try:
                self._judge_now(wait=True)
            except Exception:  # a lost log is said by the next request
                log.debug("judging %s failed", self.name, exc_info=True)
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="eventlog-serve-judge", daemon=True).start()

    def status(self, at: At = NOW, *, wait: bool = False, every: bool = False) -> dict[str, Any]:
        """The ``status --json`` view (``wait``: see :meth:`judged`; ``every``: ``--all``)."""
        return self.judged(at, wait=wait).status(every)

    def console(self, at: At = NOW, every: bool = False) -> dict[str, Any]:
        """What the console's status page shows, never an old all-clear.

        ``status``: the status view (``every``: every item); ``waiting``: the sessions that wait for a
        decision; ``commands``: what to paste (:meth:`commands`); ``problem``: null, or
        why the log cannot be judged now and since when (:meth:`trouble`). Then ``waiting`` is null and
        ``status`` is what ``eventlog status`` says of it: a log that is not there is one item, the log is
        missing; of any other problem nothing can be said (null).
        """
        commands = self.commands()
        try:
            j = self.judged(at, wait=True)
        except Unavailable as err:
            why, since = self.trouble() or (str(err), clock.now().isoformat())
            missing = None
            if getattr(self.follower, "missing", False):
                missing = msgspec.to_builtins(status_of_missing(self.name, at, self.follower.not_file)
                                              .shown(None if every else SHOWN))
            return {"status": missing, "waiting": None, "commands": commands,
                    "problem": {"message": why, "since": since}}
        return {"status": j.status(every), "waiting": j.derived("waiting", _waiting), "commands": commands,
                "problem": None}

    def commands(self) -> dict[str, str]:
        """What a person pastes to ask the log itself: ``status`` (``eventlog status LOG``) and ``all`` (its ``--all``),
        and for a URL that names a user ``note``: the commands carry no password (:func:`eventlog.logs.password_note`).

        While LOG's path holds no file a log can be (a FIFO, a directory, a device), both are ``ls -la DIR``:
        ``status`` would wait on a FIFO for ever (it reads one as ``cat`` does, on purpose) or fail.
        """
        if getattr(self.follower, "not_file", None) is not None:
            look = dir_cmd(self.name)
            return {"status": look, "all": look}
        note = password_note(self.name)
        return {"status": status_cmd(self.log_arg), "all": status_cmd(self.log_arg, every=True),
                **({"note": note} if note is not None else {})}

    def metrics(self, at: At = NOW) -> str:
        """The Prometheus exposition of ``follow --prom`` (its histograms read the folded state: under the lock)."""
        j = self.judged(at)
        with self.lock:
            text: str = j.derived("metrics", lambda d: of_replay(self.replay, d, self.stale_s, live=at.live))
        return text

    def session(self, session_id: str, at: At = NOW) -> dict[str, Any] | None:
        """One session as ``eventlog sessions --json`` shows it, or None when no event names it.

        ``needs``: the items of ``eventlog status`` about this session (reason and next command; a line of it dated
        ahead of now too, as ``eventlog sessions``: :meth:`~projections.triage.Item.about`), so
        the session page says why a person is called even when no decision would settle it;
        ``bad_lines``: the log's bad lines (how many, the first few), left out of the session's state,
        and ``named_by_bad_lines`` those that name the session, as ``eventlog sessions SESSION --json``.
        """
        triage = self.judged(at, wait=True).triage
        needs = [msgspec.to_builtins(i) for g in triage.groups for i in g.items
                 if i.about() == ("sessions", session_id)]
        with self.lock:
            replay = self.replay
            sessions = folder(replay).sessions
            if session_id not in sessions.sessions:
                return None
            when, text = at.resolve(replay.last_at, replay.last_ts)
            described = decisions.describe(sessions, session_id, when)
            records, count = replay.bad_lines, len(replay.bad_lines)
            bad = msgspec.to_builtins(BadLines.of(records))
        named = msgspec.to_builtins(self.named_by_bad_lines(session_id, records, count))
        return {"log": self.name, "as_of": text, "session_id": session_id, **described, "needs": needs,
                "bad_lines": bad, "named_by_bad_lines": named}

    def named_by_bad_lines(self, session_id: str, records: list[Any], count: int) -> list[NamedBadLine]:
        """The first ``count`` bad lines of ``records`` (the replay's) that name ``session_id`` (:func:`naming`).

        The search reads the log up to its last bad line, and a session page asks
        on every change of the log: the answer is kept while the replay's list of
        bad lines is the same and holds as many (a log's lines do not change; a
        replaced log is a new replay).
        """
        if not count:
            return []
        kept = self._named.get(session_id)
        if kept is not None and kept[0] is records and kept[1] == count:
            return kept[2]
        found = naming(self.log, records[:count], session_id)
        if len(self._named) >= NAMED_KEPT:
            self._named.clear()
        self._named[session_id] = (records, count, found)
        return found

    def unknown_session(self, session_id: str) -> str:
        """Why no session ``session_id`` is known, as ``eventlog sessions`` says it (the bad lines that name it)."""
        with self.lock:
            bad = list(self.replay.bad_lines)
        return decisions.unknown_session(self.name, session_id, bad, naming(self.log, bad, session_id))

    def turn(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """One turn of a session (:class:`projections.turns.Turn`: its first start, outcome, ``terminal_reason``,
        resolution and latest start; ``says``: all of it in line order, :func:`~projections.turns.turn_words`), or
        None when unknown."""
        self.check()
        with self.lock:
            runner = folder(self.replay)
            sessions = runner.sessions
            if session_id not in sessions.sessions or not isinstance(runner, ServedRunner):
                return None
            turn = runner.turns.turn(session_id, turn_id)
            if turn is None:
                return None
            item = sessions.sessions[session_id].item()
        return {"session_id": session_id, "turn_id": turn_id, **turn,
                "unknown": turn_id in item["unknown_turns"], "session_state": item["admission_state"],
                "says": turn_words(turn)}

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` says while the log is followed; ``writable`` false (and ``write_problem``, why) when the
        system would refuse an append now (:func:`eventlog.logs.unwritable`): reads go on, writes get 503."""
        self.check()
        unwritable = logs.unwritable(self.name)
        with self.lock:
            replay = self.replay
            return {"status": "following", "log": self.name, "events": replay.events,
                    "last_seq": replay.reader.last_seq, "last_ts": replay.last_ts, "writable": unwritable is None,
                    **({} if unwritable is None else {"write_problem": unwritable})}

    # -- writing -----------------------------------------------------------------

    def decide(self, request: decisions.Decision,
               names: Mapping[str, str] = decisions.CLI_NAMES) -> decisions.Decided:
        """:func:`eventlog.runners.sessions.decide` on the followed state, under the lock (``names``: how a bad
        field is named)."""
        self.check()
        with self.lock:
            return decisions.decide(self.log, request, names)

    def append(self, events: list[dict[str, Any]], expect_revision: int | None) -> AppendResult:
        """``eventlog append`` (checked) through the followed log; the state includes what was written."""
        self.check()
        return self.log.append(events, expect_revision=expect_revision)

    def wrote(self, refused: AppendError | None) -> None:
        """Note whether the log took a write (``refused``: why not; hold ``_write_lock``), for the operator: a
        refusal is said in the server's log once per reason, and so is the first write taken after it."""
        if refused is None:
            if self._refused is not None:
                log.warning("%s takes writes again (the last refused: %s)", self.name, self._refused)
                self._refused = None
            return
        why = "; ".join(refused.said(self.name))
        if why != self._refused:
            log.error("a write was refused with 503 LOG_UNAVAILABLE: %s (said again for another reason, and once "
                      "a write is taken)", why)
            self._refused = why

    # -- the lines themselves -------------------------------------------------------

    def tail(self, after: int | None) -> Cursor:
        """Where an event stream of the lines after seq ``after`` starts (None: after the last line now)."""
        self.check()
        with self.lock:
            replay = self.replay
            last = replay.reader.last_seq
            if after is None:
                after = last
            if self.stream and after >= last:  # a stream's line number is its sequence, its offset too
                return Cursor(after=after, offset=replay.line, line=replay.line, last_seq=last)
            if after >= last and not self.stream:
                return Cursor(after=after, offset=replay.offset, line=replay.line, last_seq=last,
                              identity=self.follower.identity)
            return Cursor(after=after)

    def lines(self, cursor: Cursor) -> list[tuple[str, int, bytes]]:
        """The next lines after ``cursor`` (which moves): (``line`` or ``bad_line``, seq, data)."""
        if self.stream:
            return self._stream_lines(cursor)
        return _file_lines(self.target, cursor)

    def _stream_lines(self, cursor: Cursor) -> list[tuple[str, int, bytes]]:
        with self._tail_lock:
            if self._tail_log is None:
                self._tail_log = open_log(self.target)
            out: list[tuple[str, int, bytes]] = []
            tail: Any = self._tail_log
            info = tail.info()
            if info is None:
                raise Unavailable(f"{self.name}: the stream is gone")
            last = min(int(info.state.last_seq), cursor.offset + TAIL_BATCH)
            if last <= cursor.offset:
                return out
            for seq, _subject, data in tail.messages(cursor.offset + 1, last):
                raw = data.replace(b"\n", b" ") if b"\n" in data else data
                out.extend(cursor.take(raw, seq))
                cursor.offset = seq
            return out


@dataclass
class Cursor:
    """Where an event stream is: the byte offset (a stream: the sequence), the line number, the reader.

    The lines of a batch (``batch_end``) are held until its last line comes and then sent together; the
    lines of a batch that another line interrupts are sent as bad lines (``uncommitted``), as a replay
    counts them: a client never gets a line of a batch that a replay would not apply.
    """

    after: int
    offset: int = 0
    line: int = 0
    last_seq: int = 0
    identity: tuple[int, int] | None = None
    reader: Reader = field(default_factory=Reader)
    #: The open batch's last seq, the seq before it, and its lines so far: (seq, line, raw).
    batch_end: int = 0
    batch_before: int = 0
    held: list[tuple[int, int, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reader.last_seq = self.last_seq

    def take(self, raw: bytes, line: int) -> list[tuple[str, int, bytes]]:
        """One line read as line number ``line``: what to send of it now (nothing at or before ``after``)."""
        before = self.reader.last_seq
        decoded = self.reader.decode(raw, line)
        self.line = line
        seq = self.reader.last_seq
        if isinstance(decoded, str):
            out = self._drop_batch()
            seq = self.reader.last_seq
            if seq >= self.after:
                out.append(("bad_line", seq, msgspec.json.encode({"line": line, "reason": decoded})))
            return out
        ev = decoded[0]
        out = []
        if self.held:
            if ev.batch_end == self.batch_end and seq == self.held[0][0] + len(self.held):
                self.held.append((seq, line, raw))
                if seq < self.batch_end:
                    return []
                whole, self.held = self.held, []
                return [self._line(s, r) for s, _line, r in whole if s > self.after]
            before = self.batch_before
            out = self._drop_batch()
            self.reader.last_seq = seq
        if ev.batch_end is not None and ev.batch_end > seq:
            self.batch_end, self.batch_before, self.held = ev.batch_end, before, [(seq, line, raw)]
            return out
        if seq > self.after:
            out.append(self._line(seq, raw))
        return out

    def _drop_batch(self) -> list[tuple[str, int, bytes]]:
        """The open batch (if any) never came whole: its lines as bad lines; the reader's seq back before it."""
        if not self.held:
            return []
        held, self.held = self.held, []
        self.reader.last_seq = self.batch_before
        reason = uncommitted_reason(self.batch_end)
        return [("bad_line", self.batch_before, msgspec.json.encode({"line": n, "reason": reason}))
                for _seq, n, _raw in held if self.batch_before >= self.after]

    @staticmethod
    def _line(seq: int, raw: bytes) -> tuple[str, int, bytes]:
        return ("line", seq, as_written(raw))  # (a CR would end the event stream's line)


class LogReplaced(Exception):
    """The file under an event stream was truncated or replaced: the stream ends, the client starts again."""


def _file_lines(path: str, cursor: Cursor) -> list[tuple[str, int, bytes]]:
    out: list[tuple[str, int, bytes]] = []
    with open_regular(path) as f:  # a FIFO put at the path: an OSError that ends the stream, not a wait for ever
        st = os.fstat(f.fileno())
        ident = (st.st_dev, st.st_ino)
        if (cursor.identity is not None and ident != cursor.identity) or st.st_size < cursor.offset:
            raise LogReplaced(f"{path} was truncated or replaced; start again with after=SEQ")
        cursor.identity = ident
        began = cursor.offset
        for lines, end, torn, _quotes in iter_blocks(f, cursor.offset, TAIL_READ):
            if torn:
                break
            for raw in lines:
                out.extend(cursor.take(raw, cursor.line + 1))
            cursor.offset = end
            if len(out) >= TAIL_BATCH or end - began >= TAIL_BYTES:
                break
    return out


def _regular_lines(path: str) -> Iterator[tuple[int, bytes]]:
    with open_regular(path) as f:
        yield from complete_lines(f)


class ServedLog(ClosedOnExit):
    """The :class:`~eventlog.logs.Log` a served decision or append goes through.

    ``append`` is the log's own (checked, under its lock) and then waits until
    the follower has folded what it wrote; ``state`` is the followed state
    (read it under :attr:`Served.lock`), not a copy.
    """

    def __init__(self, served: Served) -> None:
        self.served = served
        self.name = served.name

    def append(
        self,
        events: Iterable[dict[str, Any] | Event],
        *,
        expect_revision: int | None = None,
        check: bool = True,
        fsync: bool = False,
    ) -> AppendResult:
        """Append through the log's appender, then fold what was written into the followed state."""
        served = self.served
        with served._write_lock:
            try:
                result = served.writer.append(events, expect_revision=expect_revision, check=check, fsync=fsync)
            except (BadInput, Conflict):  # the request's fault: the log's state says nothing new
                raise
            except AppendError as err:
                served.wrote(err)
                raise
            served.wrote(None)
        try:
            served.reach(result.last_seq)
        except Unavailable as err:
            raise AppendError([f"written as seq {result.first_seq}..{result.last_seq}, but {err}"]) from err
        return result

    def state(self) -> Replay:
        """The followed state, caught up with the log now."""
        self.served.catch_up()
        return self.served.replay

    def replay(
        self,
        *,
        assume_tz: tzinfo | None = None,
        strict: bool = False,
        runner: Any = None,
        progress: Progress | None = None,
    ) -> Replay:
        """A replay from empty state (the log's own)."""
        return self.served.writer.replay(assume_tz=assume_tz, strict=strict, runner=runner, progress=progress)

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """Every line (the log's own); a file only while it is one (a FIFO at its path is refused, never read)."""
        if self.served.stream:
            return self.served.writer.lines()
        return _regular_lines(self.served.target)

    def exists(self) -> bool:
        """Whether the log is there."""
        return self.served.writer.exists()

    def close(self) -> None:
        """Nothing: the server closes its log when it stops."""


class _FileFollower(Follower):
    """The file follower of ``eventlog follow``, under the server's lock, telling it of every change."""

    def __init__(self, path: str, served: Served, assume_tz: tzinfo | None) -> None:
        super().__init__(path, ServedRunner, None, assume_tz=assume_tz)
        self.served = served

    def catch_up(self) -> str | None:
        """Catch up under the lock; a change (or a note) bumps the version."""
        with self.served.lock:
            before = file_follow.seen(self)
            note = super().catch_up()
            after = file_follow.seen(self)
        if note or after != before:
            self.served.changed()
        return note

    def folded(self) -> tuple[int, bytes]:
        """Under the lock: a decision's thread folds its line (:meth:`Served.reach`) while the follow loop verifies;
        read apart, an offset and a hash of different moments told of an edit that was none, and the whole log was
        replayed while every request waited (about 4 s on a 1M-event log)."""
        with self.served.lock:
            return super().folded()

    def edited(self) -> str:
        """Replay from the start under the lock (the requests read the state under it); the version bumps."""
        with self.served.lock:
            note = super().edited()
        self.served.changed()
        return note


def _stream_follower(log_: Log, served: Served) -> Any:
    """The JetStream follower of ``eventlog follow``, under the server's lock, telling it of every change."""
    from eventlog.jetstream import JetStreamLog, StreamFollower

    assert isinstance(log_, JetStreamLog)

    class _StreamFollower(StreamFollower):
        def start(self) -> str | None:
            with served.lock:
                note = super().start()
            served.changed()
            return note

        def catch_up(self) -> None:
            with served.lock:
                super().catch_up()
            served.changed()

        def lose(self, why: str) -> bool:
            news = super().lose(why)
            if news:
                served.changed()
            return news

        def absent(self) -> bool:
            with served.lock:
                news = super().absent()
            if news:
                served.changed()
            return news

        def regain(self) -> None:
            super().regain()
            served.changed()

        def drain(self) -> int:
            with served.lock:
                n = super().drain()
            if n:
                served.changed()
            return n

    return _StreamFollower(log_)


__all__ = ["MAX_AGE_S", "Cursor", "Judged", "LogReplaced", "Served", "ServedLog", "ServedRunner", "Unavailable"]
