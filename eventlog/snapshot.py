"""Snapshots: folded state plus the log position it belongs to.

A snapshot is a msgpack document (msgspec) holding the position in the log
(byte offset, line, last ``seq``, file identity, hashes of the first and last
4 KiB before the offset) and the pickled :class:`~eventlog.replay.Replay`.
It is trusted only when all of that still matches the file and the code's
projection version; otherwise it is ignored and the caller replays from the
start. The appender's sidecar and ``follow``/``replay --snapshot`` share it.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import IO

import msgspec

from eventlog.replay import Replay

#: Bump when this layout changes.
FORMAT = 1
_EDGE = 4096


class Position(msgspec.Struct, frozen=True):
    """Where in which file a state was taken."""

    offset: int
    line: int
    last_seq: int
    device: int
    inode: int
    head_sha256: str
    tail_sha256: str


class Snapshot(msgspec.Struct):
    """A saved state: the format, the projections' version, the position, the state."""

    format: int
    version: str
    position: Position
    state: bytes


def folder_version(replay: Replay) -> str:
    """What a snapshot of ``replay`` must match: the folder's class, the source of its package, the zone.

    The source hash means a snapshot taken by other projection code is never
    trusted, even if nobody bumped a version number.
    """
    cls = type(replay.folder)
    tz = replay.reader.assume_tz
    return f"{cls.__module__}.{cls.__qualname__}/{_source_hash(cls.__module__)}/tz={tz}"


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


def position(f: IO[bytes], replay: Replay) -> Position:
    """The position of ``replay`` in the open file ``f``."""
    fd = f.fileno()
    st = os.fstat(fd)
    head, tail = _edges(fd, replay.offset)
    return Position(replay.offset, replay.line, replay.reader.last_seq, st.st_dev, st.st_ino, head, tail)


def save(path: str, f: IO[bytes], replay: Replay, version: str) -> None:
    """Write the snapshot of ``replay`` (taken at its offset in ``f``) atomically to ``path``."""
    snap = Snapshot(FORMAT, version, position(f, replay), pickle.dumps(replay, protocol=pickle.HIGHEST_PROTOCOL))
    write_atomic(path, msgspec.msgpack.encode(snap))


def write_atomic(path: str, data: bytes, mode: int = 0o640) -> None:
    """Replace ``path`` with ``data``: a temporary file beside it, then a rename (readers never see half)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path: str, f: IO[bytes], version: str) -> tuple[Replay | None, str]:
    """The snapshot's state if it matches ``f`` and ``version``; else None and why not."""
    try:
        with open(path, "rb") as src:
            snap = msgspec.msgpack.decode(src.read(), type=Snapshot)
    except FileNotFoundError:
        return None, "no snapshot"
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as err:
        return None, f"snapshot {path} is unreadable ({err})"
    if snap.format != FORMAT or snap.version != version:
        return None, f"snapshot {path} was written by another version ({snap.version}, now {version})"
    pos = snap.position
    mismatch = differs(f, pos)
    if mismatch is not None:
        return None, f"snapshot {path} {mismatch}"
    # Unpickling builds one object per entity; with the cyclic collector on, it
    # walks the growing heap again and again (about half the load time).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        replay = pickle.loads(snap.state)  # noqa: S301 - our own file, position checked above
    except Exception as err:  # noqa: BLE001 - any broken state is ignored, never trusted
        return None, f"snapshot {path} state is unreadable ({type(err).__name__})"
    finally:
        if was_enabled:
            gc.enable()
    if not isinstance(replay, Replay) or (replay.offset, replay.line) != (pos.offset, pos.line):
        return None, f"snapshot {path} state does not match its position"
    return replay, "ok"


def differs(f: IO[bytes], pos: Position) -> str | None:
    """Why the open file ``f`` is not the one ``pos`` was taken in (None: it still is, up to the offset)."""
    st = os.fstat(f.fileno())
    if (pos.device, pos.inode) != (st.st_dev, st.st_ino):
        return "belongs to another file (the log was replaced)"
    if st.st_size < pos.offset or _edges(f.fileno(), pos.offset) != (pos.head_sha256, pos.tail_sha256):
        return "does not match the log's bytes (the log was truncated or rewritten)"
    return None


def _edges(fd: int, offset: int) -> tuple[str, str]:
    head = os.pread(fd, min(offset, _EDGE), 0)
    start = max(0, offset - _EDGE)
    tail = os.pread(fd, offset - start, start)
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()
