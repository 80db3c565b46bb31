"""The log seam: one interface, two places a log can live.

``open_log(target)`` gives the log named by a CLI ``LOG`` argument:

- a path: :class:`FileLog`, the JSONL file (the default; :class:`~eventlog.appender.EventLog`);
- ``nats://HOST:PORT/STREAM``: a NATS JetStream stream (:mod:`eventlog.jetstream`,
  imported only then, so the core never needs ``nats-py``).

Both have ``append`` (same arguments, result and exceptions as
:meth:`EventLog.append`), ``state`` (the folded :class:`~eventlog.replay.Replay`
of the whole log, for checks and runners), ``replay`` (a replay from empty
state, for ``tools/replay``), ``lines`` (every stored line or message with its
number) and ``exists``. Use them as context managers: a JetStream log holds a
connection until closed.

A LOG is printed by :func:`printed` wherever it is shown: a ``nats://`` URL without its password. A URL that
names a user (``nats://USER@HOST:PORT/STREAM``) takes the password from :data:`PASSWORD_VAR`
(:func:`credentials`), so a printed command works pasted where that variable is set.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from types import TracebackType
from typing import Any, BinaryIO, Protocol, Self

from eventlog.appender import AppendResult, EventLog, not_a_log_file
from eventlog.events import Event
from eventlog.fold import Folder
from eventlog.reader import iter_lines
from eventlog.replay import Progress, Replay

#: A LOG argument that starts with this names a JetStream stream.
NATS_SCHEME = "nats://"
#: Where a ``nats://USER@...`` LOG without a password in it takes the password from.
PASSWORD_VAR = "NATS_PASSWORD"  # noqa: S105 - the name of a variable, not a password
#: Where a ``nats://`` LOG that names no user takes a token from, when it is set.
TOKEN_VAR = "NATS_TOKEN"  # noqa: S105 - the name of a variable, not a token

#: Passwords given in this process's LOG arguments, by the LOG as printed (:func:`taken`). This process's
#: only: never put in the environment, so no command it starts gets one.
_given: dict[str, str] = {}


class LogUnavailable(OSError):
    """A log that cannot be opened or read: a bad URL, a missing client, an unreachable server (exit 2)."""


class Unreachable(LogUnavailable):
    """A stream's server cannot be reached, or did not answer in time: the log may be fine, and back soon.

    The message names the server and what did not answer; a follower waits for it to come back.
    """


class Log(Protocol):
    """What the CLI needs of a log, wherever it lives."""

    #: The LOG argument as given (the dump's ``log``).
    name: str

    def append(
        self,
        events: Iterable[dict[str, Any] | Event],
        *,
        expect_revision: int | None = None,
        check: bool = True,
        fsync: bool = False,
    ) -> AppendResult:
        """Write all events or none; raises BadInput, Conflict or AppendError (eventlog.appender)."""
        ...

    def state(self) -> Replay:
        """The folded state of the whole log now (a copy the caller may keep)."""
        ...

    def replay(
        self,
        *,
        assume_tz: tzinfo | None = None,
        strict: bool = False,
        runner: Folder | None = None,
        progress: Progress | None = None,
    ) -> Replay:
        """A replay from empty state (raises OSError when the log cannot be read, BadLine in strict mode).

        ``progress`` is called now and then with (lines, bytes) and once with (-1, 0) at the end.
        """
        ...

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """Every complete line (a file) or message (JetStream) with its number, in order."""
        ...

    def exists(self) -> bool:
        """Whether the log is there (raises OSError when that cannot be told)."""
        ...

    def close(self) -> None:
        """Release what the log holds (a connection)."""
        ...

    def __enter__(self) -> Log: ...

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class ClosedOnExit:
    """``with log:`` closes the log at the end of the block (each log class's ``close`` says what it releases)."""

    def close(self) -> None:
        """Nothing to release (a log that holds something overrides it)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class FileLog(ClosedOnExit, EventLog):
    """A JSONL file: :class:`EventLog` plus the reading side of :class:`Log`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        new_folder: Callable[[], Folder] | None = None,
        *,
        assume_tz: tzinfo | None = None,
    ) -> None:
        super().__init__(path, new_folder, assume_tz=assume_tz)
        self.name = self.path

    def replay(
        self,
        *,
        assume_tz: tzinfo | None = None,
        strict: bool = False,
        runner: Folder | None = None,
        progress: Progress | None = None,
    ) -> Replay:
        """Replay the file from empty state (raises OSError when it cannot be read)."""
        if os.path.isdir(self.path):
            raise IsADirectoryError(21, "is a directory", self.path)
        replay = Replay(runner if runner is not None else self.new_folder(), assume_tz)
        with open(self.path, "rb") as f:
            try:
                replay.feed(f, progress=progress, strict=strict)
            finally:
                if progress is not None:
                    progress(-1, 0)
        return replay

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """Every complete line with its number (a torn tail is left out)."""
        with open(self.path, "rb") as f:
            yield from complete_lines(f)

    def exists(self) -> bool:
        """Whether the file is there (a directory is not a log)."""
        return os.path.isfile(self.path)

    def close(self) -> None:
        """Nothing to release."""


def complete_lines(f: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Every complete line of an open file with its number (a torn tail is left out)."""
    for n, (raw, _end, complete) in enumerate(iter_lines(f), 1):
        if not complete:
            return
        yield n, raw


def is_url(target: str) -> bool:
    """Whether a LOG argument names a JetStream stream rather than a file."""
    return target.startswith(NATS_SCHEME)


def userinfo(url: str) -> tuple[str | None, str | None, str]:
    """A ``nats://`` URL's user (None: it names none), its password (None: none in it), and what follows the ``@``.

    The user's part ends at the URL's last ``@`` (no server, stream or option holds one), so a password
    may hold any character; the user is what comes before its first ``:``.
    """
    rest = url[len(NATS_SCHEME):]
    info, at, after = rest.rpartition("@")
    if not at:
        return None, None, rest
    user, colon, password = info.partition(":")
    return user, (password if colon else None), after


def printed(log: str) -> str:
    """LOG as every output shows it: a ``nats://`` URL without its password (``nats://USER@HOST:PORT/STREAM``,
    which opens where :data:`PASSWORD_VAR` holds it); anything else as given."""
    if not is_url(log):
        return log
    user, password, after = userinfo(log)
    return log if password is None else f"{NATS_SCHEME}{user}@{after}"


def taken(log: str) -> str:
    """A LOG argument as a command uses and shows it: :func:`printed`. A password given in it is kept in this
    process (:func:`credentials`), so the printed LOG opens here as the given one did."""
    if is_url(log) and (password := userinfo(log)[1]) is not None:
        _given[printed(log)] = password
    return printed(log)


def password_note(log: str) -> str | None:
    """What a person pasting the commands printed for LOG needs to know: for a URL that names a user, that they
    carry no password (None: nothing to know)."""
    if not is_url(log) or userinfo(log)[0] is None:
        return None
    return f"The commands name the log without its password: run them where {PASSWORD_VAR} holds it."


@dataclass(frozen=True)
class Credentials:
    """What a client gives a stream's servers: a user and password, or a token (never in a repr)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)


def credentials(url: str, env: Mapping[str, str] = os.environ) -> Credentials:
    """The credentials of a ``nats://`` LOG: its user with the password in it, else the one given to
    :func:`taken` in this process, else :data:`PASSWORD_VAR`'s; with no user, :data:`TOKEN_VAR`'s token (none when
    it is not set). ValueError when a user has no password anywhere."""
    user, password, _ = userinfo(url)
    if user is None:
        return Credentials(token=env.get(TOKEN_VAR) or None)
    if password is None:
        password = _given.get(url)
    if password is None:
        password = env.get(PASSWORD_VAR) or None
    if password is None:
        raise ValueError(f"the URL names a user and no password: set {PASSWORD_VAR} to the password (a token goes "
                         f"in {TOKEN_VAR}, with no user in the URL)")
    return Credentials(user, password)


class NotALogFile(OSError):
    """What is at a log's path is no file that can hold a log (a directory, a FIFO, a device): the message says
    which, in the appender's words (:func:`eventlog.appender.not_a_log_file`)."""


def open_regular(path: str) -> BinaryIO:
    """``path`` opened for reading, which must be a regular file: never blocks (a FIFO does in ``open()``).

    Opened without blocking, then judged by the open file itself (no race between a look and the
    open); raises :class:`NotALogFile` for a directory, a FIFO or a device, FileNotFoundError when
    there is nothing, OSError otherwise.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        why = not_a_log_file(path, os.fstat(fd).st_mode)
        if why is not None:
            raise NotALogFile(why)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def unusable(target: str) -> str | None:
    """Why LOG can never be followed, for a person; None when it can, or when it does not exist yet (it is waited for).

    Unusable: a directory, a FIFO or a device (:func:`eventlog.appender.not_a_log_file`), a file that
    cannot be read, and a file in a directory that does not exist. A stream is not looked at here.
    """
    if is_url(target):
        return None
    try:
        open_regular(target).close()
    except FileNotFoundError:
        where = os.path.dirname(target) or "."
        return None if os.path.isdir(where) else f"{target}: its directory {where} does not exist"
    except NotALogFile as err:
        return str(err)
    except OSError as err:
        return f"cannot read {target}: {err.strerror or err}"
    return None


def unwritable(target: str) -> str | None:
    """Why an append to LOG would be refused by the system now, for a person; None when it would not (as far as
    ``access(W_OK)`` tells: one or two calls, no write), and for a stream.

    An append locks and writes the log itself; a log not there yet is created in its directory. So the log
    must be writable, or, while it does not exist, its directory (one that does not exist is another matter:
    :func:`unusable`). (The sidecar beside it is a cache: not saving it refuses nothing.) A read-only file
    system is named as such: a systemd unit with ``ProtectSystem=strict`` sees every path read-only but its
    ``ReadWritePaths=``.
    """
    if is_url(target):
        return None
    where = os.path.dirname(os.path.abspath(target))
    each, what = (target, target) if os.path.lexists(target) else (where, f"{target}: its directory {where}")
    if not os.path.exists(each) or os.access(each, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
        return None
    try:
        read_only = bool(os.statvfs(each).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = ("is on a read-only file system (under systemd's ProtectSystem=strict: a path the unit's ReadWritePaths= "
           "does not hold)" if read_only else "may not be written by this user")
    return f"{what} {why}: every append and decision to it is refused"


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same device and inode when both exist (a symbolic or a hard link,
    ``./T/../T/l.jsonl``), else the same path once symbolic links are resolved (one not created yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def written_over(log: str, outputs: Iterable[tuple[str, str | None]]) -> str | None:
    """Why a command must not write its outputs (option and path; None: not given), for a person; None when it may.

    Refused, before anything is written: an output that is LOG itself (:func:`same_file`), a file eventlog keeps
    beside LOG (the appender's sidecar ``LOG.sidecar``, a runner's lock ``LOG.NAME.lock``: rewriting a lock lets
    two runners in at once), a follow's lock beside an output (:func:`output_lock_path`), or the file of another
    output. A stream LOG has no file to write over.
    """
    given = [(option, path) for option, path in outputs if path]
    for i, (option, path) in enumerate(given):
        kept = _OUTPUT_LOCK if is_output_lock(path) else None if is_url(log) else _kept_beside(log, path)
        if kept is not None:
            return f"{option} {path} is {kept}: it would be written over"
        for other, earlier in given[:i]:
            if same_file(path, earlier):
                return f"{other} {earlier} and {option} {path} are the same file: each would write over the other"
    return None


#: What a follow's lock file is, for a person (:func:`written_over`).
_OUTPUT_LOCK = "the lock file a follow holds beside an output it writes"


def output_lock_path(path: str) -> str:
    """The lock file ``follow`` holds beside an output it writes (``--dump``, ``--prom``, ``--snapshot``) for as long
    as it runs, so that no second follow writes it: ``.BASE.follow.lock`` in the output's directory, hidden as the
    output's temporary files are, and never ``*.prom`` (node_exporter's textfile directory reads those). The
    directory's symbolic links are resolved (two paths to one directory: one lock); the output's own name is not
    (follow renames a new file over that name, not over a link's target). Left there when follow ends: removing a
    lock file another process may be opening would let two in."""
    directory, base = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(directory), f".{base}.follow.lock")


def is_output_lock(path: str) -> bool:
    """Whether ``path`` is named as a follow's lock beside an output is (:func:`output_lock_path`)."""
    return re.fullmatch(r"\..+\.follow\.lock", os.path.basename(path)) is not None


def _kept_beside(log: str, path: str) -> str | None:
    """What ``path`` is, when it is the file LOG or one eventlog keeps beside it (None: neither)."""
    if same_file(path, log):
        return f"the log {log} itself"
    real = os.path.realpath(log)
    if same_file(path, log + ".sidecar") or same_file(path, real + ".sidecar"):
        return f"the sidecar of {log} (the state eventlog append keeps beside it)"
    lock = re.fullmatch(re.escape(real) + r"\.(\w+)\.lock", os.path.realpath(path))
    if lock is not None:
        return f"the lock file of the {lock[1]} runner of {log}"
    return None


def no_event_log(target: str, replay: Replay) -> str | None:
    """Why every append to LOG is refused, its file being no event log (:meth:`Replay.not_a_log`, the appender's
    rule; words that follow LOG); None when it may be a log, and for a stream, whose appender has no such rule."""
    return None if is_url(target) else replay.not_a_log()


def open_log(
    target: str | os.PathLike[str],
    new_folder: Callable[[], Folder] | None = None,
    *,
    assume_tz: tzinfo | None = None,
) -> Log:
    """The log a LOG argument names; raises :class:`LogUnavailable` for a bad URL or a missing ``nats-py``.

    ``assume_tz`` is the zone its lines without an offset are read in by ``state`` and ``append``'s check.
    """
    text = os.fspath(target)
    if not is_url(text):
        return FileLog(text, new_folder, assume_tz=assume_tz)
    try:
        from eventlog.jetstream import JetStreamLog
    except ImportError as err:
        raise LogUnavailable(
            f"{printed(text)}: a nats:// LOG needs the NATS client: pip install 'recovery-ledger[nats]' ({err})"
        ) from err
    try:
        return JetStreamLog(text, new_folder, assume_tz=assume_tz)
    except ValueError as err:
        raise LogUnavailable(f"{printed(text)}: {err}") from err


def lock_path(target: str, name: str) -> str:
    """The lock file of a runner (``catchup``, ``lanes``, ``import``) on a log.

    A file's is ``LOG.<name>.lock`` beside the file itself: LOG with its symbolic links resolved
    (``os.path.realpath``), so a runner given a link to the log and one given the log hold one lock (two
    catch-ups at once would re-run two jobs at once). A stream's is a file in a
    per-user directory of this host, so it keeps out a second runner on the
    same host only (see README: where to run the runners); OSError when that
    directory is not this user's alone (a shared /tmp).
    """
    if not is_url(target):
        return f"{os.path.realpath(target)}.{name}.lock"
    directory = os.path.join(tempfile.gettempdir(), f"eventlog-locks-{os.getuid()}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        # in a shared /tmp another user may have made it first, to hold the locks or plant files in it
        raise OSError(errno.EPERM, f"lock directory {directory} is not a directory of this user that only it "
                                   "may write; remove it")
    import hashlib  # here: only a lock beside a stream needs it

    digest = hashlib.sha256(printed(target).encode()).hexdigest()[:24]  # with or without its password: one lock
    return os.path.join(directory, f"{digest}.{name}.lock")


__all__ = ["NATS_SCHEME", "PASSWORD_VAR", "TOKEN_VAR", "Credentials", "FileLog", "Log", "LogUnavailable", "NotALogFile",
           "Unreachable", "complete_lines", "credentials", "is_output_lock", "is_url", "lock_path", "no_event_log",
           "open_log", "open_regular", "output_lock_path", "password_note", "printed", "same_file", "taken", "unusable",
           "userinfo", "written_over"]
