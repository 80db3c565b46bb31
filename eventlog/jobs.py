"""A replay split between processes: each folds some of the domains; one dump, the same as a replay in one.

Every process reads and checks the whole log (the contract pass is the same
for all); each folds only its domains' events (:attr:`projections.runner.Runner.folding`).
The others send their folded state back as typed msgpack (:func:`eventlog.snapshot.encode_state`),
and this process takes it into its own runner: each domain's state, the revision
counts (each event is counted by the one process that folds it) and the rejected
lines (merged in line order). On a machine with several cores the folds run at once.
"""

from __future__ import annotations

import os
from datetime import tzinfo
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from eventlog.logs import FileLog
from eventlog.replay import Replay
from projections.runner import DOMAINS, Runner

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

#: The domains in groups for 2, 3 and 4 processes, the biggest fold first (handoffs, then sessions).
GROUPS: dict[int, tuple[frozenset[str], ...]] = {
    2: (frozenset({"handoffs"}), frozenset({"sessions", "lanes", "catchup"})),
    3: (frozenset({"handoffs"}), frozenset({"sessions"}), frozenset({"lanes", "catchup"})),
    4: (frozenset({"handoffs"}), frozenset({"sessions"}), frozenset({"lanes"}), frozenset({"catchup"})),
}
MAX_JOBS = max(GROUPS)


class JobFailed(Exception):
    """A process of a split replay did not send its state back."""


def replay_in_jobs(path: str, jobs: int, *, assume_tz: tzinfo | None = None, strict: bool = False,
                   unpicked_minutes: float | None = None, quiet_hours: float | None = None) -> Replay:
    """Replay the file ``path`` in ``jobs`` processes (1 to :data:`MAX_JOBS`); the state as one process would fold it.

    Raises what :meth:`eventlog.logs.FileLog.replay` raises (OSError, BadLine with ``strict``), and
    :class:`JobFailed` when another process ended without its state.
    """
    settings = (unpicked_minutes, quiet_hours)
    if jobs <= 1:
        return FileLog(path).replay(assume_tz=assume_tz, strict=strict, runner=_runner(settings, DOMAINS))
    import multiprocessing  # here: a replay in one process does not import it

    mine, *theirs = GROUPS[min(jobs, MAX_JOBS)]
    context = multiprocessing.get_context("fork")
    started: list[tuple[Any, Connection, frozenset[str]]] = []
    try:
        for group in theirs:
            receive, send = context.Pipe(duplex=False)
            proc = context.Process(target=_fold_apart, args=(path, assume_tz, strict, settings, group, send),
                                   daemon=True)
            proc.start()
            send.close()
            started.append((proc, receive, group))
        replay = FileLog(path).replay(assume_tz=assume_tz, strict=strict, runner=_runner(settings, mine))
        runner = replay.folder
        assert isinstance(runner, Runner)
        for proc, receive, group in started:
            try:
                data = receive.recv_bytes()
            except EOFError:
                proc.join()
                raise JobFailed(f"the process folding {', '.join(sorted(group))} ended ({proc.exitcode}) "
                                "without its state") from None
            _take(runner, data, group, replay.reader.assume_tz)
        runner.folding = mine.union(*theirs)
        runner._route()
        return replay
    finally:
        for child, pipe, _group in started:
            pipe.close()
            if child.is_alive():
                child.terminate()
            child.join()


def _runner(settings: tuple[float | None, float | None], folding: frozenset[str]) -> Runner:
    return Runner(unpicked_minutes=settings[0], quiet_hours=settings[1], folding=folding)


def _fold_apart(path: str, assume_tz: tzinfo | None, strict: bool, settings: tuple[float | None, float | None],
                group: frozenset[str], send: Connection) -> None:
    """In a child: fold ``group``'s domains and send the state (nothing on a bad line: the parent names it)."""
    from eventlog import snapshot

    try:
        replay = FileLog(path).replay(assume_tz=assume_tz, strict=strict, runner=_runner(settings, group))
        send.send_bytes(snapshot.encode_state(replay, split=False))
        send.close()
    except BaseException:  # noqa: BLE001 - the parent reads the log too, and says what went wrong
        os._exit(1)
    os._exit(0)  # the state is the OS's to free


def _take(runner: Runner, data: bytes, group: frozenset[str], assume_tz: tzinfo | None) -> None:
    """Take the folded state of ``group``'s domains from another process into ``runner``."""
    from eventlog import snapshot  # here: a replay in one process does not import it

    other = Replay(Runner(), assume_tz)
    why = snapshot.decode_state(data, other)
    if why is not None:
        raise JobFailed(f"the state of {', '.join(sorted(group))} came back unreadable: {why}")
    theirs = other.folder
    assert isinstance(theirs, Runner)
    for part, their_part in zip(runner.parts, theirs.parts, strict=True):
        if part.name in group:
            part.state = their_part.state  # type: ignore[misc]
    for field, counts in theirs.counts.items():  # a handoff's and a session's own came with their domain
        mine = runner.counts[field]
        for key, n in counts.items():
            mine[key] = mine.get(key, 0) + n
    if theirs.rejected:
        runner.rejected = sorted(runner.rejected + theirs.rejected, key=itemgetter("line"))
