"""API keys for ``eventlog serve``: stored as hashes, compared in constant time.

A key file is one JSON object ``{"keys": [{"name", "scopes", "sha256"}]}`` of
mode 0600. :func:`add_key` makes a new random key, stores only its SHA-256
(a key is 256 random bits, so a fast hash is enough: there is nothing to guess
from it), its name and its scopes, and returns the key itself once. Whoever can
write the file can put in a key of their own under any name and act as that name:
:func:`access` names each way a user other than its owner could (the file's mode,
its directory's), and :func:`serving` (the server's read), ``add`` and ``remove``
refuse such a file.
:func:`load` checks every entry of a file by the rule ``add`` follows
(:func:`entry_problems`): one bad entry of a hand-edited file makes it unusable.
:func:`list_keys` gives the names and scopes (never the hashes);
:func:`remove_key` takes one out. Both writers replace the file atomically
(readers, a running server included, see the old file or the new one), each
holding the file's directory locked from reading to renaming (:func:`_editing`),
so an add and a remove at once cannot bring back the key removed. They write the
file a symlink names (a server reading it by either path sees the change), and
refuse a file with more than one hard link (the others would keep the old keys).
:meth:`Keys.find` hashes a presented key and compares it with every stored hash
(``hmac.compare_digest``, no early exit), so timing tells nothing about them.
"""

from __future__ import annotations

import fcntl
import grp
import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import msgspec

from eventlog.importers import open_file
from eventlog.snapshot import write_atomic
from projections.triage import command, q

#: What a key may be allowed to do (spec: Operator HTTP API).
SCOPES = ("read", "events:append", "sessions:recover")
#: Every key starts with this, so a leaked one is easy to recognise (and grep for).
PREFIX = "rlk_"
#: A name is the ``actor`` of the decisions sent with the key: printable, no spaces.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
#: What :func:`digest` gives.
_SHA256 = re.compile(r"[0-9a-f]{64}")


class KeyError_(ValueError):  # noqa: N801 - KeyError is a builtin with another meaning
    """A key file that cannot be used, or a key that cannot be added (a CLI's exit 2)."""


class Key(msgspec.Struct, forbid_unknown_fields=True):
    """One stored key: its name (the actor), its scopes, the SHA-256 of the key in hex."""

    name: str
    scopes: list[str]
    sha256: str


class KeyFile(msgspec.Struct, forbid_unknown_fields=True):
    """The file's content."""

    keys: list[Key] = msgspec.field(default_factory=list)


class Listed(msgspec.Struct):
    """What ``keys list`` shows of a key: its name and scopes, never its hash."""

    name: str
    scopes: list[str]


def digest(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class Keys:
    """The keys of one file, looked up by the key a request presents."""

    def __init__(self, keys: Sequence[Key] = ()) -> None:
        self.keys = list(keys)

    def find(self, presented: str) -> Key | None:
        """The key whose hash matches, comparing with every one of them in constant time."""
        wanted = digest(presented).encode()
        found = None
        for key in self.keys:
            if hmac.compare_digest(wanted, key.sha256.encode()):
                found = key
        return found


def load(path: str) -> Keys:
    """The keys of a key file; KeyError_ naming the file and the reason when it cannot be used.

    Every entry is checked by the rule ``keys add`` follows (:func:`entry_problems`): one bad entry (a
    hand-edited file) makes the whole file unusable, as a file that is no JSON does, each one named.
    """
    keys = _read(path)
    bad = [(n, k, why) for n, k in enumerate(keys, 1) for why in entry_problems(k, keys[:n - 1])]
    if bad:
        problems = "; ".join(f"entry {n} (name {k.name!r}): {why}" for n, k, why in bad)
        names = dict.fromkeys(k.name for _, k, _ in bad)
        remove = "; ".join(command("eventlog keys remove", [path, name]) for name in names)
        raise KeyError_(f"key file {path}: {problems} (fix the file, or take out every key of "
                        f"{'that name' if len(names) == 1 else 'those names'}: {remove})")
    return Keys(keys)


#: What a user who can change a key file could do, and what refuses it (:func:`access`).
_FORGE = "any of them could put in a key of their own under any name and act as that name"
_REFUSED = "serve, keys add and keys remove refuse it until"


class Access(NamedTuple):
    """Who besides its owner may change or read a key file (:func:`access`): one message each, saying the risk."""

    #: Its group or other users can write the file, or replace it (its directory): they could put in a key
    #: of their own under any name and act as it. ``serve``, ``add`` and ``remove`` refuse it.
    writable: list[str]
    #: Its group or other users can read it: the names, scopes and hashes (a hash does not give a key away).
    readable: list[str]


def access(path: str) -> Access:
    """Who besides its owner may change or read the key file ``path``, each said with the ``chmod`` that ends it.

    The file's mode (group or other write bits; read bits), and the directory holding it, and the one
    holding the file a symlink names: a directory its group or other users can write (without the sticky
    bit) lets them put another file in its place. A file that is not there is only judged by its directory.
    """
    writable, readable = [], []
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        mode = stat.S_IMODE(st.st_mode)
        who = _who(mode, stat.S_IWGRP, stat.S_IWOTH, st.st_gid)
        if who is not None:
            writable.append(f"key file {path} has mode {mode:04o}: {who} can write it, so {_FORGE}; {_REFUSED} "
                            f"`chmod 600 {q(path)}` (then check its keys, `eventlog keys list {q(path)}`: anyone "
                            "could have changed them)")
        else:
            who = _who(mode, stat.S_IRGRP, stat.S_IROTH, st.st_gid)
            if who is not None:
                readable.append(f"key file {path} has mode {mode:04o}: {who} can read it: the names and scopes "
                                f"of the keys, and their hashes (which do not give a key away); `chmod 600 "
                                f"{q(path)}` keeps them to its owner")
    for directory in _directories(path):
        try:
            dst = os.stat(directory)
        except OSError:
            continue
        mode = stat.S_IMODE(dst.st_mode)
        who = None if mode & stat.S_ISVTX else _who(mode, stat.S_IWGRP, stat.S_IWOTH, dst.st_gid)
        if who is not None:
            writable.append(f"the directory {directory} of key file {path} has mode {mode:04o}: {who} can put "
                            f"another file in its place, so {_FORGE}; {_REFUSED} `chmod go-w {q(directory)}`")
    return Access(writable, readable)


def _directories(path: str) -> list[str]:
    """The directories whose users may replace the key file ``path``: its own and that of the file it links to."""
    return list(dict.fromkeys([os.path.dirname(os.path.abspath(path)), os.path.dirname(os.path.realpath(path))]))


def stamp(path: str) -> tuple[int, ...]:
    """What changes when the key file ``path`` or who may change it (:func:`access`) changes: another file, size,
    mtime, ctime (a ``chmod``), or another mode of a directory holding it. OSError when the file is not there."""
    st = os.stat(path)
    marks = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode]
    for directory in _directories(path):
        try:
            dst = os.stat(directory)
            marks += [dst.st_ino, dst.st_mode]
        except OSError:
            marks += [-1, -1]
    return tuple(marks)


def _who(mode: int, group_bit: int, other_bit: int, gid: int) -> str | None:
    """Who besides the owner ``mode`` lets do what ``group_bit`` and ``other_bit`` allow (None: nobody)."""
    group, others = mode & group_bit, mode & other_bit
    if group and others:
        return "every user of this host"
    try:
        name = grp.getgrgid(gid).gr_name
    except KeyError:
        name = str(gid)
    if group:
        return f"every member of the group {name}"
    if others:
        return f"every user outside the group {name}"
    return None


def serving(path: str) -> tuple[Keys, list[str]]:
    """The keys ``eventlog serve`` may use and what to warn about (:attr:`Access.readable`); KeyError_ naming
    the reason when the file cannot be used: it cannot be read, an entry is bad (:func:`load`), or a user
    other than its owner can change it (:attr:`Access.writable`, with the ``chmod`` to type)."""
    seen = access(path)
    if seen.writable:
        raise KeyError_("; ".join(seen.writable))
    return load(path), seen.readable


def named(path: str) -> str:
    """``path`` as messages name it: with the file it links to when it is a symlink."""
    real = os.path.realpath(path)
    return path if real == os.path.abspath(path) else f"{path} (a link to {real})"


def entry_problems(key: Key, before: Sequence[Key] = ()) -> list[str]:
    """What is wrong with ``key`` as an entry of a key file after the entries ``before``: the one rule of
    ``keys add`` and of :func:`load`. A name is 1 to 64 of ``A-Z a-z 0-9 . _ @ -``, the first a letter or
    digit (it is the actor of decisions), and unique; scopes are one or more of :data:`SCOPES`; ``sha256`` is
    64 lowercase hex digits (what :func:`digest` gives), and unique."""
    problems = []
    if not _NAME.fullmatch(key.name):
        problems.append("a name is 1 to 64 of A-Z a-z 0-9 . _ @ -, the first a letter or digit (it is the actor "
                        "of decisions)")
    elif any(k.name == key.name for k in before):
        problems.append(f"the file already has a key named {key.name!r}")
    bad = [s for s in key.scopes if s not in SCOPES]
    if bad or not key.scopes:
        problems.append(f"scope(s) {', '.join(bad) or '(none)'}: give one or more of {', '.join(SCOPES)}")
    if not _SHA256.fullmatch(key.sha256):
        problems.append("sha256 is not 64 lowercase hex digits (the SHA-256 of the key)")
    elif any(k.sha256 == key.sha256 for k in before):
        problems.append("the file already has this key (the same sha256)")
    return problems


def _read(path: str) -> list[Key]:
    """The entries of a key file, not checked; KeyError_ when it cannot be read or is no key file.

    Opened as the runners open a user's file (:func:`eventlog.importers.open_file`): a FIFO or a device is refused,
    never read (a FIFO would hang ``serve`` at its start, or every request at a reload, SIGTERM included).
    """
    try:
        with open_file(path) as f:
            data = f.read()
    except OSError as err:
        raise KeyError_(f"cannot read key file {path}: {err.strerror or err}") from err
    try:
        return msgspec.json.decode(data, type=KeyFile).keys
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise KeyError_(f"key file {path} is not a key file: {err}") from err


def add_key(path: str, name: str, scopes: Sequence[str]) -> str:
    """Add a new random key named ``name`` with ``scopes`` to the file (created with mode 0600); the key.

    The key is returned once and never stored. KeyError_ for a bad name, an
    unknown scope, a name already in the file, or a file that cannot be used.
    """
    key = PREFIX + secrets.token_urlsafe(32)
    entry = Key(name=name, scopes=list(scopes), sha256=digest(key))
    with _editing(path) as real:
        existing = load(path).keys if os.path.exists(real) else []
        problems = entry_problems(entry, existing)
        if problems:
            raise KeyError_(f"key {name!r} for {path}: {'; '.join(problems)}")
        entry.scopes = sorted(set(scopes), key=SCOPES.index)
        _save(path, real, [*existing, entry])
    return key


def list_keys(path: str) -> list[Listed]:
    """The name and scopes of every key of the file, in file order; KeyError_ when the file cannot be used."""
    return [Listed(k.name, list(k.scopes)) for k in load(path).keys]


def remove_key(path: str, name: str) -> Listed:
    """Take the key named ``name`` out of the file (rewritten atomically, mode 0600); what it was.

    A server reading the file refuses the key from its next request on.
    KeyError_ when the file has no key of that name or cannot be used.
    """
    with _editing(path) as real:
        existing = _read(path)  # an entry load() refuses can be taken out by its name
        kept = [k for k in existing if k.name != name]
        if len(kept) == len(existing):
            raise KeyError_(f"key file {path} has no key named {name!r}")
        _save(path, real, kept)
    gone = next(k for k in existing if k.name == name)
    return Listed(gone.name, list(gone.scopes))


@contextmanager
def _editing(path: str) -> Iterator[str]:
    """Hold the directory of the key file locked (``flock``, waiting for another edit) while it is edited; the
    file to write: ``path`` with its symlinks resolved (a rewrite of the link itself would leave the file it
    names, which a server may read, with the old keys).

    The file itself is replaced by a rename, so a lock on it would be on the old
    file: its directory stays. KeyError_ when the directory cannot be opened, when
    a user other than its owner can change the file (:func:`access`), or when the
    file has other hard links (the rename would replace this one only).
    """
    real = os.path.realpath(path)
    try:
        fd = os.open(os.path.dirname(real), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise KeyError_(f"cannot write key file {named(path)}: {err.strerror or err}") from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        writable = access(path).writable
        if writable:
            raise KeyError_("; ".join(writable))
        links = os.stat(real).st_nlink if os.path.exists(real) else 1
        if links > 1:
            raise KeyError_(f"key file {named(path)} has {links} hard links: a rewrite would replace this name "
                            "only, and a server reading another would keep the old keys; keep only one "
                            f"(`find / -xdev -samefile {q(real)}` lists them)")
        yield real
    finally:
        os.close(fd)


def _save(path: str, real: str, keys: list[Key]) -> None:
    """Replace the file ``real`` (``path`` resolved) with ``keys`` (mode 0600); KeyError_ when it cannot be written."""
    try:
        write_atomic(real, msgspec.json.format(msgspec.json.encode(KeyFile(keys))) + b"\n", mode=0o600)
        os.chmod(real, 0o600)  # an existing file keeps no wider mode than this
    except OSError as err:
        raise KeyError_(f"cannot write key file {named(path)}: {err.strerror or err}") from err


__all__ = ["PREFIX", "SCOPES", "Access", "Key", "KeyError_", "KeyFile", "Keys", "Listed", "access", "add_key",
           "digest", "entry_problems", "list_keys", "load", "named", "remove_key", "serving",
           "stamp"]
