"""Snapshots: folded state plus the log position it belongs to, as typed msgpack.

A snapshot is one msgpack document (msgspec): the format, the version of the
code that wrote it, the position in the log (byte offset, line, last ``seq``,
file identity, hashes of the first and last 4 KiB before the offset and an
xxh3-128 of every byte before it) and the state, a :class:`~eventlog.replay.ReplayState` holding the folder's ``State``
struct. Nothing in it is code: it is decoded by a typed decoder built from
those declarations, so a forged, truncated or wrong-shaped file is at worst
refused (the caller then replays the log), never run.

It is used only when the format, the version and the position still match
the file, every byte before its offset included (so a same-length edit
anywhere in the log, inode kept, is noticed: :func:`prefix_hash`, about 20 ms
for a 130 MB log of a million events); the state is decoded only then. The appender's sidecar,
``follow --snapshot`` and ``replay --snapshot`` share it; a JetStream
snapshot (:mod:`eventlog.jetstream`) carries the same state bytes.

Loading part of it: the state is split (:mod:`eventlog.lazystate`) into a
small core and the big maps and lists, a map in buckets, so the appender
decodes the buckets of the entities it touches and nothing else.
"""

from __future__ import annotations

import copy as _copy
import errno
import functools
import gc
import hashlib
import os
import re
import secrets
import stat
import sys
import time
import zlib
from pathlib import Path
from typing import IO, NamedTuple, TypeVar

import msgspec
import xxhash

from eventlog import lazystate
from eventlog.fold import Stateful
from eventlog.replay import Replay, ReplayState

#: Bump when the envelope or the state's encoding changes (format 1 held untyped state: never read again;
#: format 2 had no hash of the whole prefix).
FORMAT = 3
_EDGE = 4096
#: Names tried for a temporary file before giving up (each is random, so a clash means someone plants them).
_TEMP_TRIES = 100
#: How long a temporary file of :func:`write_atomic` must have been left untouched before
#: :func:`remove_leftovers` takes it for the leftover of a writer killed mid-write.
LEFTOVER_S = 60.0


_S = TypeVar("_S", bound=msgspec.Struct)


class NotSaved(Exception):
    """A snapshot not saved: a state msgpack cannot hold (an integer past 64 bits, a time outside years 1-9999 in
    UTC), or a file that cannot be written (the message says why, in :func:`why_not_written`'s words)."""


class Position(msgspec.Struct, frozen=True):
    """Where in which file a state was taken."""

    offset: int
    line: int
    last_seq: int
    device: int
    inode: int
    head_sha256: str
    tail_sha256: str
    #: xxh3-128 of every byte before ``offset`` (:func:`prefix_hash`).
    prefix_xxh3: str


class Snapshot(msgspec.Struct, kw_only=True):
    """A saved state: the format, the projections' version, the position, the state's CRC-32, the state and the log.

    ``state`` is the msgpack of a :class:`~eventlog.replay.ReplayState`, held
    as bytes (a view into the file when read): it is decoded, with its own
    typed decoder, only after everything else matched. The CRC catches a
    damaged file (a flipped bit, a partial copy) before that; it is no defence
    against a forger, who can compute it.
    """

    format: int
    version: str
    position: Position
    #: The log's absolute path (as given, links not resolved) when it was saved; None: not said (an older writer).
    log: str | None = None
    state_crc32: int
    #: Last in the file: a damaged file is most often one cut short, and the CRC-32 above covers it.
    state: memoryview


class _Stamp(msgspec.Struct):
    """What any format of a snapshot file starts with: read first, so a file of another format is named as such."""

    format: int
    version: str | None = None


class _Tally(msgspec.Struct):
    """Of a saved :class:`~eventlog.replay.ReplayState`, what any version of it holds: its committed lines."""

    events: int


def folder_version(replay: Replay) -> str:
    """What a snapshot of ``replay`` must match: the folder's class and settings, the source of its package, the zone.

    The source hash means a snapshot taken by other projection code is never
    trusted, even if nobody bumped a version number.
    """
    folder = replay.folder
    cls = type(folder)
    tz = replay.reader.assume_tz
    key = folder.state_key() if isinstance(folder, Stateful) else "stateless"
    return f"{cls.__module__}.{cls.__qualname__}/{_source_hash(cls.__module__)}/tz={tz}/{key}"


@functools.cache
def _source_hash(module: str) -> str:
    """A hash of every ``.py`` file of the package ``module`` belongs to (and of this package)."""
    digest = hashlib.sha256()
    for name in (module.split(".")[0], __name__.split(".")[0]):
        package = sys.modules[name]
        for path in sorted(Path(next(iter(package.__path__))).glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# --- the state codec -------------------------------------------------------------------------


_encoder = msgspec.msgpack.Encoder()


def encode_state(replay: Replay, split: bool = True) -> bytes:
    """The replay's folded state as split msgpack (:mod:`eventlog.lazystate`); NotSaved when msgpack cannot hold it.

    ``split=False`` splits only containers loaded lazily (a copy in memory needs no buckets).
    """
    try:
        state = replay.save_state()
    except TypeError as err:  # a folder without typed state
        raise NotSaved(str(err)) from None
    try:
        return lazystate.encode(state, lazystate.SPLIT_OVER if split else None)
    except (OverflowError, ValueError, TypeError) as err:  # msgspec.EncodeError is a ValueError
        raise NotSaved(f"the state holds a value msgpack cannot ({err})") from None


def decode_state(data: bytes | memoryview, fresh: Replay, expect: Position | None = None,
                 lazy: bool = False) -> str | None:
    """Decode a state into the fresh replay ``fresh``; None when done, else why not (``fresh`` unchanged).

    With ``expect``, a state at another offset, line or ``seq`` is refused too.
    ``lazy``: its big maps and lists are decoded as they are used (:mod:`eventlog.lazystate`).
    """
    folder = fresh.folder
    if not isinstance(folder, Stateful):
        return f"{type(folder).__name__} keeps no typed state"
    # Decoding builds one object per entity; with the cyclic collector on, it
    # walks the growing heap again and again (about half the load time).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        state = lazystate.decode(data, ReplayState[folder.State], lazy)  # type: ignore[name-defined]
        if expect is not None and (state.offset, state.line, state.last_seq) != (
            expect.offset, expect.line, expect.last_seq
        ):
            return "its state does not match its position"
        fresh.load_state(state)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        return f"its state does not fit this code's types ({err})"
    except (ValueError, OverflowError) as err:
        return f"its state holds a value out of range or a part its types do not have ({err})"
    finally:
        if was_enabled:
            gc.enable()
    return None


def copy(replay: Replay, fresh: Replay) -> Replay:
    """A copy of ``replay`` made in ``fresh`` (an empty replay of a folder like ``replay``'s) through the codec."""
    try:
        data = encode_state(replay, split=False)
    except NotSaved:
        return _copy.deepcopy(replay)  # a state msgpack cannot hold: the slow way
    why = decode_state(data, fresh)
    if why is not None:
        raise AssertionError(f"a state this code encoded does not decode: {why}")
    return fresh


# --- files -----------------------------------------------------------------------------------


def edges(f: IO[bytes], offset: int) -> tuple[str, str]:
    """The SHA-256 of the first and of the last 4 KiB before ``offset`` in the open file ``f`` (cheap, O(1))."""
    return _edges(f.fileno(), offset)


def position(f: IO[bytes], replay: Replay) -> Position:
    """The position of ``replay`` in the open file ``f``."""
    fd = f.fileno()
    st = os.fstat(fd)
    head, tail = _edges(fd, replay.offset)
    return Position(replay.offset, replay.line, replay.reader.last_seq, st.st_dev, st.st_ino, head, tail,
                    prefix_hash(fd, replay.offset).hexdigest())


def save(path: str, f: IO[bytes], replay: Replay, version: str, log: str | None = None) -> None:
    """Write the snapshot of ``replay`` (taken at its offset in ``f``, the log at the path ``log``) atomically to
    ``path``.

    Raises :class:`NotSaved` (nothing written) when msgpack cannot hold the
    state or the file cannot be written (:func:`write_cache`); OSError when ``f`` cannot be read.
    """
    state = encode_state(replay)
    where = None if log is None else os.path.abspath(log)
    snap = Snapshot(format=FORMAT, version=version, position=position(f, replay), log=where,
                    state_crc32=zlib.crc32(state), state=memoryview(state))
    write_cache(path, _encoder.encode(snap))


def write_cache(path: str, data: bytes) -> None:
    """:func:`write_atomic` for a cache (a snapshot): a file that cannot be written is :class:`NotSaved`, saying why
    in :func:`why_not_written`'s words (a cache not saved is no error: its caller says so and goes on)."""
    try:
        write_atomic(path, data)
    except OSError as err:
        raise NotSaved(why_not_written(path, err)) from err


def write_atomic(path: str, data: bytes, mode: int = 0o640) -> None:
    """Replace ``path`` with ``data`` durably; readers see the old file or the new one, never half.

    The temporary file is created beside ``path`` under a random name with
    ``O_EXCL|O_NOFOLLOW`` (a planted file or symlink is never opened, let alone
    followed), written, fsynced, renamed over ``path``, and the directory is
    fsynced. On any failure the temporary file is removed and the error raised.
    """
    directory, base = os.path.split(os.path.abspath(path))
    fd, tmp = _create_temp(directory, base, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def why_not_written(path: str, err: OSError) -> str:
    """Why :func:`write_atomic` could not replace ``path`` (``err``, what it raised), in words that name the place
    at fault: a directory that is not there, a directory at ``path``, or a directory that takes no new file. It
    writes a new file beside ``path`` and renames it over it, so a file it could overwrite does not help when no
    file can be created there (``/proc``, whose files are made by the kernel, answers that with ENOENT)."""
    directory, base = os.path.split(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"{directory} is not a directory" if os.path.lexists(directory) else \
            f"its directory {directory} does not exist"
    if os.path.isdir(path):
        return "it is a directory"
    made = err.filename is not None and err.filename2 is None and \
        os.path.basename(os.fsdecode(err.filename)).startswith(f".{base}.")  # creating the temporary file
    if not made:
        return err.strerror or str(err)
    cause = "it takes no new file" if err.errno == errno.ENOENT else (err.strerror or str(err))
    return f"no file can be created in {directory} ({cause}); it is written as a new file there, then renamed over it"


def _create_temp(directory: str, base: str, mode: int) -> tuple[int, str]:
    """A new file ``.BASE.<random>.tmp`` in ``directory``, opened for writing: (fd, path)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMP_TRIES):
        tmp = os.path.join(directory, f".{base}.{_random_suffix()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {os.path.join(directory, base)} after {_TEMP_TRIES} tries")


def _random_suffix() -> str:
    return secrets.token_hex(8)


class Swept(NamedTuple):
    """What :func:`remove_leftovers` did: the paths it removed, and when (``time.time()``) the youngest of those it
    left for being written too lately comes of age (None: it left none)."""

    removed: list[str]
    due: float | None


def remove_leftovers(path: str, older_than_s: float = LEFTOVER_S) -> Swept:
    """Remove the temporary files :func:`write_atomic` left beside ``path`` when killed mid-write.

    Removed are only names it makes for ``path`` (``.BASE.<16 hex>.tmp``), regular files
    (a symlink or anything else is left), not written for ``older_than_s`` seconds. Call it
    only under a lock every writer of ``path`` holds while it writes (the appender's, for
    the sidecar; a follow's or ``replay --snapshot``'s output lock, for their outputs): then no
    temporary file is anyone's work in progress, and the age guards one written by a writer
    that does not take it. A failure to list or remove is no error.
    """
    directory, base = os.path.split(os.path.abspath(path))
    name = re.compile(rf"\.{re.escape(base)}\.[0-9a-f]{{16}}\.tmp")
    before = time.time() - older_than_s
    removed, left = [], []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not name.fullmatch(entry.name):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    if st.st_mtime >= before:
                        left.append(st.st_mtime + older_than_s)
                        continue
                    os.unlink(entry.path)
                    removed.append(entry.path)
                except OSError:
                    continue
    except OSError:
        pass
    return Swept(removed, min(left, default=None))


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (where the file system allows fsync of a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename itself is done
    finally:
        os.close(fd)


def read_regular(path: str) -> bytes:
    """The bytes of ``path``, which must be a regular file (a FIFO or a device is refused, never read).

    FileNotFoundError when there is none; OSError (with a reason) otherwise.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:  # closes fd
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return f.read()


def read(path: str, kind: type[_S], fmt: int) -> tuple[_S | None, str]:
    """The snapshot file at ``path`` decoded as ``kind`` (an envelope of format ``fmt``); else None and why not.

    Its ``format`` is read first: a file another format of the code wrote is said to be that, not unreadable
    (an older envelope lacks a field this one has). Nothing but the envelope is checked here.
    """
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None, "no snapshot"
    except OSError as err:
        return None, f"snapshot {path} is unreadable ({err.strerror or err})"
    try:
        stamp = msgspec.msgpack.decode(data, type=_Stamp)
        if stamp.format != fmt:
            return None, (f"snapshot {path} was written by another version (format {stamp.format}: {stamp.version}; "
                          f"this one reads format {fmt})")
        return msgspec.msgpack.decode(data, type=kind), "ok"
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        return None, f"snapshot {path} is unreadable ({err})"


def load(path: str, f: IO[bytes], fresh: Replay, lazy: bool = False) -> tuple[Replay | None, str]:
    """``fresh`` holding the snapshot's state if it matches ``f`` and ``fresh``'s version; else None and why not.

    ``lazy``: only the parts of the state that are used get decoded (the appender).
    """
    version = folder_version(fresh)
    snap, unread = read(path, Snapshot, FORMAT)
    if snap is None:
        return None, unread
    if snap.version != version:
        return None, f"snapshot {path} was written by another version ({snap.format}: {snap.version}, now {version})"
    pos = snap.position
    mismatch = differs(f, pos)
    if mismatch is not None:
        return None, f"snapshot {path} {mismatch}"
    if zlib.crc32(snap.state) != snap.state_crc32:
        return None, f"snapshot {path} is damaged (its state does not match its CRC-32)"
    why = decode_state(snap.state, fresh, pos, lazy)
    if why is not None:
        return None, f"snapshot {path} is refused: {why}"
    return fresh, "ok"


def committed(path: str, log: str, f: IO[bytes] | None = None) -> int | None:
    """How many committed lines (events) the snapshot at ``path`` says the log held when it was saved, whatever
    version of the code saved it; None when it cannot tell.

    It tells for a snapshot of this log only: saved for the same path (``log``, as given), or of the same file
    (``f``, open on it, has the device and inode it names; None: no file at the path now); undamaged (its CRC-32);
    in this format, with a state that holds ``events``. :meth:`eventlog.follow.Follower.start` counts the lines that
    vanished while no follow ran from it, as a running follow counts those that vanish under it.
    """
    snap, _why = read(path, Snapshot, FORMAT)
    if snap is None:
        return None
    st = None if f is None else os.fstat(f.fileno())
    same_file = st is not None and (snap.position.device, snap.position.inode) == (st.st_dev, st.st_ino)
    if snap.log != os.path.abspath(log) and not same_file:
        return None
    return events_in(snap.state, snap.state_crc32)


def events_in(state: bytes | memoryview, crc32: int) -> int | None:
    """How many committed lines (events) a snapshot's saved state holds, whatever version of the code saved it; None
    when it cannot tell (damaged: not its CRC-32, or a state without ``events``). A file's snapshot (:func:`committed`)
    and a stream's (``eventlog.jetstream.committed``) are read so."""
    if zlib.crc32(state) != crc32:
        return None
    try:
        return msgspec.msgpack.decode(lazystate.core(state), type=_Tally).events
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def differs(f: IO[bytes], pos: Position) -> str | None:
    """Why the open file ``f`` is not the one ``pos`` was taken in (None: it still is, up to the offset)."""
    st = os.fstat(f.fileno())
    if (pos.device, pos.inode) != (st.st_dev, st.st_ino):
        return "belongs to another file (the log was replaced)"
    if st.st_size < pos.offset or _edges(f.fileno(), pos.offset) != (pos.head_sha256, pos.tail_sha256):
        return "does not match the log's bytes (the log was truncated or rewritten)"
    if prefix_hash(f.fileno(), pos.offset).hexdigest() != pos.prefix_xxh3:
        return "does not match the log's bytes (the log was edited before its offset)"
    return None


def prefix_hash(fd: int, offset: int) -> xxhash.xxh3_128:
    """An xxh3-128 of the first ``offset`` bytes of the open file ``fd``; more can be added to it.

    Read a MiB at a time into one buffer (it stays in the CPU's cache: faster
    than mapping the file). xxh3 finds accidents and edits, not a forger who
    also rewrites the snapshot (whoever can write the log can do that anyway).
    """
    digest = xxhash.xxh3_128()
    buffer = memoryview(bytearray(min(offset, _CHUNK)))
    done = 0
    while done < offset:
        got = os.preadv(fd, [buffer[: min(_CHUNK, offset - done)]], done)
        if got <= 0:
            break  # the file is shorter than offset: the digest says so
        digest.update(buffer[:got])
        done += got
    return digest


_CHUNK = 1 << 20


def _edges(fd: int, offset: int) -> tuple[str, str]:
    head = os.pread(fd, min(offset, _EDGE), 0)
    start = max(0, offset - _EDGE)
    tail = os.pread(fd, offset - start, start)
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()
