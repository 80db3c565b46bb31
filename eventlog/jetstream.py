"""The log on NATS JetStream: the same events, one subject per stream, checked appends.

A LOG of the form ``nats://[USER[:PASS]@]HOST:PORT[,HOST:PORT...]/STREAM[?prefix=P&replicas=N&timeout=S]``
names a JetStream stream (a user without a password in the URL: the password is ``NATS_PASSWORD``'s; no
user: ``NATS_TOKEN``'s token, if set; :func:`eventlog.logs.credentials`). A log's ``name`` never holds the
password (:func:`eventlog.logs.printed`). This module is imported only for such a LOG, so
``nats-py`` is needed only then (the ``nats`` extra).

The mapping (docs: README, "When to move from a file to JetStream, and how"):

- **Subjects.** An event goes to ``<prefix>.<kind>.<id>`` where ``kind`` names
  its stream key: ``handoff`` (``handoff_id``), ``account``, ``product``,
  ``label``, ``session`` (``session_id``). An event with no stream key
  (``lane_check``, ``watcher_run``, ``circuit_*``, ...) goes to ``<prefix>.log``;
  a line that is not an event (only ``import-log`` writes those) goes to
  ``<prefix>.bad``. The stream takes ``<prefix>.>``; ``prefix`` is ``events``
  unless the URL says otherwise (an existing stream's own prefix is read
  from its configuration).
- **Ids in subjects** (:func:`encode_id`): every byte of the UTF-8 id other
  than ``A-Z a-z 0-9 - _`` is written ``%XX`` (upper-case hex), so ``.``,
  ``*``, ``>``, spaces and ``%`` itself never reach the subject; the empty id
  is ``%``. The mapping is one to one (:func:`decode_id` undoes it).
- **Bodies.** The message body is the event's JSON object, the same schema as
  a file line. The stream sequence IS the event's ``seq`` and its line
  number: an appended body carries no ``seq`` and the reader gives it the
  stream sequence. A body that carries ``seq`` (imported from a file, or another
  client's) keeps it, so an imported log replays exactly as its file. Once such
  a ``seq`` runs ahead of the stream sequence, the appender continues after it,
  as a file appender continues from the file's last ``seq``: each body carries
  its ``seq``, and the append expects the stream's last sequence. A newline in a
  body reads as a space (a line cannot hold one).
- **Reading** is bounded: an ordered consumer (``nats-py``'s ``ordered_consumer``)
  from a sequence up to the stream's last sequence when the read started;
  a few messages are fetched one by one from the stream leader instead. A
  sequence below the last that holds no message any more (deleted, purged,
  dropped by the stream's limits) is a vanished line (``Replay.skip``).
- **Streams made elsewhere** are taken unless they drop messages by themselves
  (:func:`drops_messages`): writes refuse those.
- **Checked appends.** The state is the replay of the stream (kept in memory
  by a :class:`JetStreamLog` and caught up from where it stopped). The events
  are checked against it with the same projections as a file append, then
  published with ``Nats-Expected-Last-Subject-Sequence`` = the last sequence
  on the event's subject (0 if none) when the append checks the transition or
  expects a revision; events with no stream key carry no expectation (no rule
  refuses them). JetStream refuses a publish whose subject moved meanwhile
  (error 10071, or 10164 in a batch): that is a lost race. The append then
  re-reads and re-checks against the new state, as a file writer does once it
  gets the lock: the check refuses what no longer fits (:class:`Conflict`),
  else it is published again; after :data:`MAX_RACES` lost races in a row it
  gives up with :class:`Conflict`.
- **Batches** of several events are all or nothing: an atomic batch
  (``Nats-Batch-Id``/``-Sequence``/``-Commit``, nats-server 2.12+, stream
  ``allow_atomic``, at most 1000 events). The expectation goes on the first
  message of each subject in the batch.
- **Retries store once.** Every message carries a ``Nats-Msg-Id`` (one id per
  append and line). A publish whose acknowledgement does not come in time is
  published again with the same ids (:data:`UNSURE_RETRIES`): the server
  stores it once within its duplicate window (2 minutes by default), and the
  stream's last message on the subject says whether the first try landed.
  Only when no try is acknowledged does :class:`AppendError` say the events
  may or may not be stored.
- ``fsync`` is the server's business (its ``sync_interval``); ``torn_tail`` is
  always false (a message is whole or absent).
- **Every request is bounded** by the URL's ``timeout`` (connecting to each
  server, a publish's acknowledgement, a read, the stream's info). A server
  that hangs is noticed within ``timeout`` while connected (a ping every half
  of it; one unanswered is enough), and a connection that drops is made again
  for ever, with backoff (:data:`RECONNECT_FIRST_S` doubling up to
  :data:`RECONNECT_MAX_S`). A server that cannot be reached, or does not
  answer in time, is :class:`Unreachable`, in one line naming the server and
  what did not answer; :func:`follow` waits for it (saying so) and resumes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import random
import re
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import IO, Any, NamedTuple, TypeVar
from urllib.parse import parse_qs, unquote

import msgspec
import nats
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy, StorageType, StreamConfig, StreamInfo
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from eventlog import clock, snapshot
from eventlog.appender import (
    AppendError,
    AppendResult,
    BadInput,
    Conflict,
    _reads_back,
    _written,
    seq_exhausted,
    validated,
)
from eventlog.events import INT64_MAX, KEY_FIELDS, Event, stream_of, type_name
from eventlog.fold import Folder, Rejected
from eventlog.follow import TICK_S, LogUnreachable, Schedule, keep_snapshot, vanished_since, wake_ms
from eventlog.logs import ClosedOnExit, Credentials, LogUnavailable, Unreachable, credentials, printed, userinfo
from eventlog.reader import Reader, check_object, deeper_at, iter_lines
from eventlog.replay import Progress, Replay
from eventlog.tail import Uncommitted
from projections.triage import LinesVanished

T = TypeVar("T")

#: The subject kind of each stream key field.
KINDS: dict[str, str] = {
    "handoff_id": "handoff",
    "account": "account",
    "product": "product",
    "label": "label",
    "session_id": "session",
}
assert tuple(KINDS) == KEY_FIELDS

DEFAULT_PREFIX = "events"
#: JetStream error codes of a publish whose expected last (subject) sequence did not hold.
LOST_RACE_CODES = frozenset({10071, 10164})
#: Lost races in a row before an append gives up with Conflict.
MAX_RACES = 16
#: JetStream's error code for a batch holding a message id the stream has seen (within the duplicate window).
DUPLICATE_IN_BATCH = 10201
#: Times a plan whose acknowledgement never came is published again (its message ids make it stored once).
UNSURE_RETRIES = 2
#: The server's limit on the messages of one atomic batch.
MAX_BATCH = 1000
#: Fewer messages than this are fetched one by one instead of through a consumer.
FEW = 32
#: Messages read per consumer.
CHUNK = 50_000
#: The wait before the first attempt to connect again; doubled after each failed attempt, up to RECONNECT_MAX_S.
RECONNECT_FIRST_S = 0.5
#: The longest wait between two attempts to connect again (they go on for ever).
RECONNECT_MAX_S = 5.0
#: How often a follower asks a server that answers for a stream it does not hold (:class:`NoStream`).
MISSING_RETRY_S = 1.0

_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_SAFE_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
_encoder = msgspec.json.Encoder()
_untyped = msgspec.json.Decoder()

EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
MSG_ID = "Nats-Msg-Id"
BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"


# --- the URL and the subjects ------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a stream is: servers (no credentials in them), stream name, subject prefix, replicas for a new stream,
    timeout, and the credentials to give the servers."""

    servers: tuple[str, ...]
    stream: str
    prefix: str | None
    replicas: int = 1
    timeout: float = 10.0
    credentials: Credentials = field(default_factory=Credentials)


def parse_url(url: str, env: Mapping[str, str] = os.environ) -> Target:
    """Parse ``nats://[USER[:PASS]@]HOST:PORT[,HOST:PORT...]/STREAM[?prefix=P&replicas=N&timeout=S]``; the
    credentials come from it or from ``env`` (:func:`eventlog.logs.credentials`)."""
    if not url.startswith("nats://"):
        raise ValueError("not a nats:// URL")
    rest = userinfo(url)[2]
    rest, _, query = rest.partition("?")
    hosts, slash, path = rest.partition("/")
    stream = unquote(path)
    if not slash or not stream:
        raise ValueError("no stream: write nats://HOST:PORT/STREAM")
    if not _STREAM_NAME.fullmatch(stream):
        raise ValueError(f"stream name {stream!r}: use letters, digits, - and _ only")
    if not hosts:
        raise ValueError("no server: write nats://HOST:PORT/STREAM")
    servers = []
    for host in hosts.split(","):
        if not host:
            raise ValueError("an empty server in the list")
        servers.append(f"nats://{host}")
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True, strict_parsing=False).items()}
    unknown = set(params) - {"prefix", "replicas", "timeout"}
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))} (known: prefix, replicas, timeout)")
    prefix = params.get("prefix")
    if prefix is not None and not _TOKEN.fullmatch(prefix):
        raise ValueError(f"prefix {prefix!r}: dot-separated tokens of letters, digits, - and _")
    try:
        replicas = int(params.get("replicas", "1"))
        timeout = float(params.get("timeout", "10"))
    except ValueError as err:
        raise ValueError(f"replicas or timeout: {err}") from None
    if not 1 <= replicas <= 5:
        raise ValueError("replicas must be 1 to 5")
    if not 0 < timeout <= 3600:
        raise ValueError("timeout must be more than 0 seconds")
    return Target(tuple(servers), stream, prefix, replicas, timeout, credentials(url, env))


def encode_id(value: str) -> str:
    """An id as one subject token: bytes outside ``A-Z a-z 0-9 - _`` as ``%XX``; the empty id as ``%``."""
    if not value:
        return "%"
    if _SAFE.fullmatch(value):
        return value
    return "".join(chr(b) if b in _SAFE_BYTES else f"%{b:02X}" for b in value.encode("utf-8", "surrogatepass"))


def decode_id(text: str) -> str:
    """The id an :func:`encode_id` token stands for."""
    if text == "%":
        return ""
    return unquote(text, errors="surrogatepass")


def subject_of(prefix: str, ev: Event) -> str:
    """``<prefix>.<kind>.<id>`` of the event's stream, or ``<prefix>.log`` when it has none."""
    key = stream_of(ev)
    if key is None:
        return f"{prefix}.log"
    return f"{prefix}.{KINDS[key[0]]}.{encode_id(key[1])}"


# --- folding messages -------------------------------------------------------------------


@dataclass
class StreamState:
    """A stream folded up to ``read_to``: the replay, the stream's identity, the last sequence of each subject."""

    replay: Replay
    created: str | None = None
    read_to: int = 0
    subjects: dict[str, int] = field(default_factory=dict)

    def fold(self, seq: int, subject: str, data: bytes, strict: bool = False) -> None:
        """Fold one message: its sequence is its line number and, when the body has none, its ``seq``.

        Sequences skipped since the last one folded hold no message any more (deleted, purged, dropped by the
        stream's limits): they are counted as vanished lines (:meth:`eventlog.replay.Replay.skip`).
        """
        self.replay.skip(self.read_to + 1, seq - 1)
        raw = data.replace(b"\n", b" ") if b"\n" in data else data
        self.replay.fold_line(raw, seq, strict)
        self.subjects[subject] = seq
        self.read_to = seq

    def read_up_to(self, last: int) -> None:
        """The stream was read up to its last sequence ``last``: sequences after the last one folded hold no message
        (the last messages were deleted); they are counted as vanished lines."""
        self.replay.skip(self.read_to + 1, last)
        self.read_to = max(self.read_to, last)


def _copy(replay: Replay, new_folder: Callable[[], Folder]) -> Replay:
    """A copy of ``replay`` to check appends on (through the typed state codec)."""
    return snapshot.copy(replay, Replay(new_folder(), replay.reader.assume_tz))


def _default_folder() -> Folder:
    from projections.runner import Runner  # the same projections as a file log's

    return Runner()


class NoStream(LogUnavailable):
    """The server answers and holds no such stream: not made yet, or gone (a server that lost its store, a stream
    deleted). :func:`follow` waits for it, as a file follower waits for a file that is not there."""


class _Stuck(Unreachable):
    """A call on the connection's loop did not end in its bound: a publish in it may or may not have landed."""


class Message(NamedTuple):
    """One message of an append: its subject and body, the subject's expected last sequence, its ``Nats-Msg-Id``;
    the stream's expected last sequence (``after``: on the first message of an append whose body carries its
    ``seq``), and that ``seq`` (None: the stream sequence stands in)."""

    subject: str
    body: bytes
    expected: int | None
    msg_id: str
    after: int | None = None
    seq: int | None = None


class _LostRace(Exception):
    """A publish refused because the subject moved since the state was read."""


class _Duplicate(Exception):
    """A batch refused because a message id of it is stored already (it was published before)."""


class _Unsure(Exception):
    """No acknowledgement came: the messages may or may not be stored."""


class _NoAtomic(Exception):
    """The stream does not take atomic batches."""


def _value(setting: object) -> object:
    """An enum setting of nats-py's as its wire value (others as they are)."""
    return getattr(setting, "value", setting)


def drops_messages(config: StreamConfig) -> list[str]:
    """The settings under which the server drops a stream's messages by itself (empty: none).

    Those are a retention other than ``limits`` (a message goes once consumed), ``max_age``, and ``max_msgs``,
    ``max_bytes`` or ``max_msgs_per_subject`` whose discard policy is ``old``. With ``discard: new`` the server
    refuses a message over a limit instead (the append fails and says so); deletes and purges are a client's
    act, which the readers count (``lines_vanished``).
    """
    found = []
    retention = _value(config.retention)
    if retention not in (None, "limits"):
        found.append(f"retention {retention}: a message goes once it is consumed")
    if config.max_age:
        found.append(f"max_age {config.max_age:g} s")
    discard_old = _value(config.discard) in (None, "old")
    for name in ("max_msgs", "max_bytes"):
        limit = getattr(config, name)
        if discard_old and limit is not None and limit > 0:
            found.append(f"{name} {limit} with discard old")
    per_subject = config.max_msgs_per_subject
    if per_subject is not None and per_subject > 0 and (discard_old or not config.discard_new_per_subject):
        found.append(f"max_msgs_per_subject {per_subject}, the oldest of a subject discarded")
    return found


def _position(reply: str) -> tuple[int, int]:
    """The stream sequence and the pending count from a JetStream ack subject (both layouts)."""
    tokens = reply.split(".")
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(tokens[5]), int(tokens[8])
    # $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>]
    return int(tokens[7]), int(tokens[10])


# --- the log --------------------------------------------------------------------------------


class JetStreamLog(ClosedOnExit):
    """A log that is a JetStream stream; the same API as :class:`eventlog.logs.FileLog`.

    The connection runs on a private event loop in a background thread, so the
    methods are plain blocking calls; one thread at a time may use an object.
    ``before_publish(attempt)``, when given, is called after the check and
    before each publish (a seam for tests that force a race).
    """

    def __init__(
        self,
        url: str,
        new_folder: Callable[[], Folder] | None = None,
        *,
        before_publish: Callable[[int], None] | None = None,
        assume_tz: tzinfo | None = None,
    ) -> None:
        #: The log as printed (:func:`eventlog.logs.printed`): never its password.
        self.name = printed(url)
        #: The zone the stream's lines without an offset are read in by ``state`` and ``append``'s check.
        self.assume_tz = assume_tz
        self.target = parse_url(url)
        self.new_folder = new_folder or _default_folder
        self.before_publish = before_publish
        #: Publishes refused as lost races so far (each was re-checked).
        self.races_lost = 0
        self._prefix = self.target.prefix
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._cache: StreamState | None = None
        self._atomic_checked = False
        #: The client's last error while the connection is down (None while it is up).
        self._last_error: str | None = None
        #: Connections made so far, the client's own reconnections included (a consumer lives on one).
        self.connects = 0

    # -- plumbing --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the connection was opened and is now closed for good (an error the client does not retry)."""
        return self._nc is not None and self._nc.is_closed

    @property
    def connected(self) -> bool:
        """Whether the connection is up now (False while the client reconnects)."""
        return self._nc is not None and self._nc.is_connected

    @property
    def reconnecting(self) -> bool:
        """Whether the connection is down and the client is making it again (it does so for ever)."""
        return self._nc is not None and not self._nc.is_closed and not self._nc.is_connected

    @property
    def prefix(self) -> str:
        """The subject prefix (known once the stream was looked up or created)."""
        return self._prefix or DEFAULT_PREFIX

    @property
    def server(self) -> str:
        """The server the connection is to (the servers of the URL while there is none), without credentials."""
        url = self._nc.connected_url if self._nc is not None else None
        if url is not None and url.hostname:
            return f"nats://{url.hostname}:{url.port}"
        return ", ".join(self.target.servers)

    def why_down(self) -> str:
        """Why the connection is not up, in words naming the server (the client's last error, when it gave one)."""
        why = f"the connection to {self.server} is " + ("closed" if self.closed else "down, reconnecting")
        if self._last_error:
            why += f" (last try: {self._last_error})"
        return why

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the connection's loop and wait for it; :class:`_Stuck` when it takes longer than its bound.

        Every request in ``coro`` has its own bound (``timeout``); this one only keeps a caller from
        waiting for ever on a call that does not end.
        """
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=f"eventlog-nats-{self.target.stream}", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        bound = timeout if timeout is not None else self.target.timeout * (6 + len(self.target.servers)) + 30
        try:
            return future.result(bound)
        except TimeoutError as err:
            if future.done():  # a request's own, not caught where it was made
                raise _Stuck(f"{self.server} did not answer in time") from err
            future.cancel()
            raise _Stuck(f"{self.server} did not answer in {bound:g} s") from None

    async def _connection(self) -> tuple[Client, JetStreamContext]:
        """The connection: made when there is none (every server tried for ``timeout``); :class:`Unreachable` while
        it is down (the client connects again by itself, for ever) or when it cannot be made."""
        if self._nc is not None and not self._nc.is_closed:
            if not self._nc.is_connected:
                raise Unreachable(self.why_down())
            assert self._js is not None
            return self._nc, self._js
        self._nc = self._js = None
        nc = Client()
        timeout = self.target.timeout

        async def failed(err: Exception) -> None:  # an attempt to connect failed, or the connection did
            self._last_error = _words(err)
            if not nc.is_connected:  # back off, for ever
                nc.options["reconnect_time_wait"] = min(RECONNECT_MAX_S, 2 * nc.options["reconnect_time_wait"])

        async def back() -> None:
            self._last_error = None
            self.connects += 1
            nc.options["reconnect_time_wait"] = RECONNECT_FIRST_S

        async def dropped() -> None:  # an error from before is not why it dropped
            self._last_error = None

        self._last_error = None
        bound = timeout * len(self.target.servers)
        # nats-py types the times as int; it waits and sleeps on floats. A ping every half timeout, one left
        # unanswered: a server that hangs is noticed within timeout.
        seconds: dict[str, Any] = {"connect_timeout": timeout, "reconnect_time_wait": RECONNECT_FIRST_S,
                                   "ping_interval": timeout / 2}
        given = self.target.credentials
        try:
            await asyncio.wait_for(nc.connect(servers=list(self.target.servers), name="eventlog",
                                              user=given.user, password=given.password, token=given.token,
                                              max_reconnect_attempts=-1, max_outstanding_pings=1, error_cb=failed,
                                              disconnected_cb=dropped, reconnected_cb=back, **seconds), bound)
        except (nats.errors.Error, OSError, TimeoutError) as err:
            last = self._last_error  # (before close, which calls the client back)
            try:
                await nc.close()
            except Exception:  # noqa: BLE001, S110 - it never connected: nothing to release but what close frees
                pass
            if not isinstance(err, TimeoutError):
                why = _words(err)
            elif last is None or last == NO_ANSWER:  # the bound passed while a server kept silent
                why = f"no answer in {bound:g} s"
            else:
                why = f"{last} (tried for {bound:g} s)"
            raise Unreachable(f"cannot connect to {self.server}: {why}") from err
        self._last_error = None
        self.connects += 1
        self._nc, self._js = nc, nc.jetstream(timeout=timeout)
        return nc, self._js

    def _failed(self, err: BaseException, what: str) -> LogUnavailable:
        """``what`` (a request) failed with ``err``, in one line naming the server: :class:`Unreachable` when the
        server did not answer, is not there or is not ready (JetStream unavailable), else :class:`LogUnavailable`."""
        if isinstance(err, LogUnavailable):
            return err
        if isinstance(err, APIError) and not isinstance(err, ServiceUnavailableError):
            return LogUnavailable(f"{what}: {_api_text(err)}")
        if isinstance(err, TimeoutError):
            return Unreachable(f"{self.server} did not answer in {self.target.timeout:g} s ({what})")
        if isinstance(err, nats.errors.NoRespondersError):
            return Unreachable(f"{what}: JetStream does not answer on {self.server} (not running, or not ready yet)")
        return Unreachable(f"{what}: {self.server}: {_words(err)}")

    def close(self) -> None:
        """Close the connection and stop its loop."""
        if self._loop is None:
            return
        if self._nc is not None and not self._nc.is_closed:
            try:
                self._run(self._nc.close(), timeout=10)
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        try:  # a client that gave up reconnecting leaves its subscriptions' tasks pending
            self._run(_cancel_pending(), timeout=10)
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = self._thread = self._nc = self._js = None

    def __del__(self) -> None:
        if sys.is_finalizing():  # the loop's thread may be frozen already: leave the socket to the OS
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - never raise from a finaliser
            pass

    # -- the stream ------------------------------------------------------------------

    async def _info(self) -> StreamInfo | None:
        """The stream's info, or None when there is no such stream; learns its prefix."""
        _, js = await self._connection()
        try:
            info = await js.stream_info(self.target.stream)
        except NotFoundError:
            return None
        except (nats.errors.Error, OSError) as err:
            raise self._failed(err, f"the info of stream {self.target.stream}") from err
        self._learn_prefix(info)
        return info

    def _learn_prefix(self, info: StreamInfo) -> None:
        subjects = info.config.subjects or []
        if len(subjects) != 1 or not subjects[0].endswith(".>"):
            raise LogUnavailable(
                f"{self.name}: stream {self.target.stream} takes {subjects}, not one '<prefix>.>': not an event log"
            )
        prefix = subjects[0][:-2]
        if self.target.prefix is not None and self.target.prefix != prefix:
            raise LogUnavailable(f"{self.name}: stream {self.target.stream} has prefix {prefix!r}, "
                                 f"not {self.target.prefix!r}")
        self._prefix = prefix

    async def _ensure_stream(self) -> StreamInfo:
        """The stream's info, creating the stream when there is none."""
        info = await self._info()
        if info is not None:
            return info
        _, js = await self._connection()
        config = StreamConfig(
            name=self.target.stream,
            description="recovery-ledger event log (eventlog)",
            subjects=[f"{self.prefix}.>"],
            storage=StorageType.FILE,
            num_replicas=self.target.replicas,
            allow_atomic=True,
            deny_delete=True,
            deny_purge=True,
        )
        try:
            info = await js.add_stream(config)
        except APIError as err:
            if err.err_code == 10058:  # created meanwhile by another writer
                again = await self._info()
                if again is not None:
                    return again
            raise AppendError([f"cannot create stream {self.target.stream}: {_api_text(err)}"]) from err
        except (nats.errors.Error, OSError) as err:
            raise AppendError([f"cannot create stream {self.target.stream}: {err or type(err).__name__}"]) from err
        self._learn_prefix(info)
        self._atomic_checked = True
        return info

    def writable(self, info: StreamInfo | None) -> None:
        """LogUnavailable when the stream drops messages by itself (:func:`drops_messages`): nothing is written
        into it, as lines written there would go uncounted by any writer."""
        drops = [] if info is None else drops_messages(info.config)
        if drops:
            stream = self.target.stream
            raise LogUnavailable(
                f"{self.name}: stream {stream} drops messages by itself ({'; '.join(drops)}), and an event log "
                f"keeps every line (line N stays sequence N): lift that (nats stream edit {stream} ...), or give "
                "the log a stream of its own (eventlog creates it on the first append)")

    def exists(self) -> bool:
        """Whether the stream is there (raises :class:`LogUnavailable` when the server cannot be asked)."""
        return self._run(self._info()) is not None

    def info(self) -> StreamInfo | None:
        """The stream's info, or None."""
        return self._run(self._info())

    # -- reading ---------------------------------------------------------------------

    async def _get_next(self, seq: int) -> tuple[int, str, bytes] | None:
        """The first message at or after ``seq``, from the stream leader (None: there is none)."""
        nc, _ = await self._connection()
        request = json.dumps({"seq": seq, "next_by_subj": f"{self.prefix}.>"}).encode()
        try:
            reply = await nc.request(f"$JS.API.STREAM.MSG.GET.{self.target.stream}", request,
                                     timeout=self.target.timeout)
        except (nats.errors.Error, OSError) as err:
            raise self._failed(err, f"reading seq {seq}") from err
        resp = json.loads(reply.data)
        if "error" in resp:
            if resp["error"].get("code") == 404:
                return None
            raise LogUnavailable(f"{self.name}: cannot read seq {seq}: {resp['error'].get('description')}")
        msg = resp["message"]
        data = base64.b64decode(msg["data"]) if msg.get("data") else b""
        return int(msg["seq"]), str(msg["subject"]), data

    async def _fetch(self, start: int, end: int) -> list[tuple[int, str, bytes]]:
        """Every message with ``start <= seq <= end``, in order (an empty list when none is left)."""
        if end - start < FEW:
            out: list[tuple[int, str, bytes]] = []
            seq = start
            while seq <= end:
                got = await self._get_next(seq)
                if got is None or got[0] > end:
                    break
                out.append(got)
                seq = got[0] + 1
            return out
        return await self._consume(start, end)

    async def _consume(self, start: int, end: int) -> list[tuple[int, str, bytes]]:
        """Read ``start..end`` with an ordered consumer; stop at ``end`` or when nothing is pending."""
        _, js = await self._connection()
        out: list[tuple[int, str, bytes]] = []
        done = asyncio.Event()
        moved = asyncio.Event()

        async def take(msg: Msg) -> None:
            if done.is_set() or not msg.reply:
                return
            seq, pending = _position(msg.reply)
            if seq <= end:
                out.append((seq, msg.subject, msg.data))
            if seq >= end or pending == 0:
                done.set()
            moved.set()

        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
        try:
            sub = await js.subscribe(f"{self.prefix}.>", stream=self.target.stream, ordered_consumer=True,
                                     cb=take, config=config)
        except (nats.errors.Error, OSError) as err:
            raise self._failed(err, f"a consumer from seq {start}") from err
        try:
            while not done.is_set():
                moved.clear()
                try:
                    await asyncio.wait_for(moved.wait(), self.target.timeout)
                except TimeoutError:
                    raise Unreachable(f"{self.server} sent nothing for {self.target.timeout:g} s "
                                      f"(reading seq {out[-1][0] + 1 if out else start} of {end})") from None
        finally:
            try:
                await sub.unsubscribe()
            except (nats.errors.Error, OSError):
                pass
        return out

    def messages(self, start: int = 1, end: int | None = None) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, subject, body)`` of every message from ``start`` to ``end`` (default: the last one now)."""
        if end is None:
            end = self._last_seq()
        while start <= end:
            chunk = self._run(self._fetch(start, min(end, start + CHUNK - 1)))
            if not chunk:
                if end - start < CHUNK:
                    return
                start += CHUNK  # a whole chunk deleted: go on after it
                continue
            yield from chunk
            start = chunk[-1][0] + 1

    def _last_seq(self) -> int:
        """The stream's last sequence now (LogUnavailable when there is no such stream)."""
        info = self._run(self._info())
        if info is None:
            raise LogUnavailable(f"{self.name}: no stream {self.target.stream} on {self.target.servers[0]}")
        return int(info.state.last_seq)

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """Every message as ``(seq, body)``, a newline in a body read as a space."""
        for seq, _subject, data in self.messages():
            yield seq, data.replace(b"\n", b" ")

    def replay(
        self,
        *,
        assume_tz: tzinfo | None = None,
        strict: bool = False,
        runner: Folder | None = None,
        progress: Progress | None = None,
    ) -> Replay:
        """Replay the stream from empty state up to its last sequence now."""
        state = StreamState(Replay(runner if runner is not None else self.new_folder(), assume_tz))
        last = self._last_seq()
        try:
            for seq, subject, data in self.messages(1, last):
                state.fold(seq, subject, data, strict)
                if progress is not None and not seq & 0xFFFF:
                    progress(seq, 0)
        finally:
            if progress is not None:
                progress(-1, 0)
        state.read_up_to(last)
        return state.replay

    def catch_up(self, state: StreamState, info: StreamInfo | None = None) -> StreamState:
        """Fold what the stream got after ``state``; a fresh state when the stream was replaced."""
        if info is None:
            info = self._run(self._info())
        if info is None:
            return StreamState(Replay(self.new_folder(), state.replay.reader.assume_tz))
        created = info.created.isoformat() if info.created else None
        last = info.state.last_seq
        if state.created != created or last < state.read_to:
            state = StreamState(Replay(self.new_folder(), state.replay.reader.assume_tz), created)
        for seq, subject, data in self.messages(state.read_to + 1, last):
            state.fold(seq, subject, data)
        state.read_up_to(last)
        return state

    def _state(self, create: bool = False) -> StreamState:
        """The stream folded up to now; ``create``: for a write (the stream is created when absent, and refused
        when it drops messages by itself: :func:`drops_messages`)."""
        info = self._run(self._ensure_stream() if create else self._info())
        if create:
            self.writable(info)
        base = self._cache or StreamState(Replay(self.new_folder(), self.assume_tz))
        self._cache = self.catch_up(base, info)
        return self._cache

    def state(self) -> Replay:
        """The folded state of the whole stream now (a copy; the log keeps its own and catches it up)."""
        try:
            return _copy(self._state().replay, self.new_folder)
        except LogUnavailable as err:
            raise AppendError([str(err)]) from err

    # -- appending -------------------------------------------------------------------

    def append(
        self,
        events: Iterable[dict[str, Any] | Event],
        *,
        expect_revision: int | None = None,
        check: bool = True,
        fsync: bool = False,
        now: Callable[[], datetime] | None = None,
    ) -> AppendResult:
        """Check and publish all events or none (see the module's docstring); ``fsync`` is the server's."""
        checked = validated(events, now)
        if len(checked) > MAX_BATCH:
            raise BadInput([f"{len(checked)} events: a JetStream append takes at most {MAX_BATCH} at once"])
        for attempt in range(MAX_RACES):
            try:
                plan = self._prepare(checked, expect_revision, check)
            except LogUnavailable as err:
                raise self._not_written(err) from err
            if self.before_publish is not None:
                self.before_publish(attempt)
            try:
                first, last = self._publish_surely(plan)
            except _LostRace:
                self.races_lost += 1
                time.sleep(random.uniform(0, 0.002) * (attempt + 1))  # noqa: S311 - jitter, not crypto
                continue
            except LogUnavailable as err:
                raise self._not_written(err) from err
            if plan[0].seq is not None:  # the events carry their own seq: that is what a replay gives them
                return AppendResult(plan[0].seq, plan[0].seq + len(plan) - 1, len(checked), offset=last)
            return AppendResult(first, last, len(checked), offset=last)  # a stream's position is its sequence
        raise Conflict([f"line 1: lost the race for {plan[0].subject} {MAX_RACES} times in a row; nothing was written"])

    def _not_written(self, err: LogUnavailable) -> AppendError:
        """The append's error for ``err`` (which names the log, or not: the log is named once)."""
        failed = AppendError([f"{err}; nothing was written"])
        failed.names_log = str(err).startswith(f"{self.name}:")
        return failed

    def _publish_surely(self, plan: list[Message]) -> tuple[int, int]:
        """Publish ``plan``; when no acknowledgement came, publish the very same messages again (UNSURE_RETRIES).

        Their ``Nats-Msg-Id`` make the server store them once: a retry of what
        was stored is answered as a duplicate, refused as a repeated id in a
        batch (10201) or, with an expected last sequence, as a lost race; in
        each case the stream's last message on the subject tells whether it is
        this plan's (then its sequence is the answer).
        """
        why: Exception
        try:
            return self._run(self._publish(plan))
        except (_Unsure, _Stuck) as unsure:
            why = unsure
        for _ in range(UNSURE_RETRIES):
            try:
                return self._run(self._publish(plan))
            except (_LostRace, _Duplicate):
                try:
                    stored = self._run(self._stored(plan))
                except LogUnavailable as down:
                    why = down
                    break
                if stored is not None:
                    return stored
                raise
            except _Unsure as again:
                why = again
            except LogUnavailable as down:  # the connection went down meanwhile: no answer will come now
                why = down
                break
        raise AppendError([f"{why}; the events may or may not have been written: replay the log to see"])

    async def _stored(self, plan: list[Message]) -> tuple[int, int] | None:
        """The sequences of ``plan`` if its last message is the last one on its subject (by ``Nats-Msg-Id``)."""
        _, js = await self._connection()
        try:
            msg = await js.get_last_msg(self.target.stream, plan[-1].subject)
        except (nats.errors.Error, OSError, NotFoundError):
            return None
        if (msg.headers or {}).get(MSG_ID) != plan[-1].msg_id or msg.seq is None:
            return None
        return msg.seq - len(plan) + 1, msg.seq

    def _prepare(
        self,
        checked: list[tuple[dict[str, Any], Event, datetime]],
        expect_revision: int | None,
        check: bool,
    ) -> list[Message]:
        """Catch up, check the events on a copy of the state; the message of each."""
        state = self._state(create=True)
        replay = _copy(state.replay, self.new_folder)
        if expect_revision is not None:
            have = replay.folder.revision(checked[0][1])
            if have != expect_revision:
                raise Conflict([f"line 1: expected revision {expect_revision}, stream is at {have}"])
        # A line that set its own seq ahead of its sequence (another client, or a file imported so) leaves the
        # stream's seq ahead: the events then carry seq from there on, as a file appender's continue from the
        # file's last (spec: strictly increasing), and the append expects the stream's last sequence, so that
        # nothing written meanwhile can make two lines carry one seq.
        ahead = replay.reader.last_seq > state.read_to
        first_seq = (replay.reader.last_seq if ahead else state.read_to) + 1
        if first_seq + len(checked) - 1 > INT64_MAX:
            raise AppendError([f"{seq_exhausted(replay.reader.last_seq, len(checked))}; nothing was written"])
        guard = check or expect_revision is not None
        refused: list[str] = []
        plan: list[Message] = []
        seen: set[str] = set()
        append_id = uuid.uuid4().hex  # one per append: a retry of the same plan carries the same ids
        limit = self._nc.max_payload if self._nc is not None else 1 << 20
        reader = Reader(self.assume_tz)  # what a reader will make of each body (the file append's check)
        reader.last_seq = first_seq - 1
        for i, (obj, ev, at) in enumerate(checked, 1):
            ev.seq = first_seq + i - 1
            result = replay.apply(ev, at)
            if check and isinstance(result, Rejected):
                refused.append(f"line {i}: {type_name(ev)} rejected: {result.reason}")
            body = _body(obj, ev.seq if ahead else None)
            why = _reads_back(reader, body, state.read_to + i, ev)
            if why is not None:
                raise BadInput([f"line {i}: {why}"])
            too_big = over_payload(len(body), limit)
            if too_big is not None:
                raise BadInput([f"line {i}: too_long: {too_big}; nothing was written"])
            subject = subject_of(self.prefix, ev)
            expected = None
            if guard and stream_of(ev) is not None and subject not in seen:
                expected = state.subjects.get(subject, 0)
            seen.add(subject)
            after = state.read_to if ahead and i == 1 else None
            plan.append(Message(subject, body, expected, f"{append_id}-{i}", after, ev.seq if ahead else None))
        if refused:
            raise Conflict(refused)
        return plan

    async def _publish(self, plan: list[Message]) -> tuple[int, int]:
        """Publish one message, or an atomic batch; the first and last stream sequence.

        Every message carries its ``Nats-Msg-Id``: the same plan published again
        (a retry after an acknowledgement that never came) is stored once, within
        the stream's duplicate window (2 minutes by default).
        """
        if len(plan) == 1:
            msg = plan[0]
            ack = await self._request(msg.subject, msg.body, _headers(msg, {MSG_ID: msg.msg_id}))
            seq = int(ack["seq"])
            return seq, seq
        try:
            return await self._publish_batch(plan)
        except _NoAtomic:
            if self._atomic_checked:
                raise AppendError([f"stream {self.target.stream} does not take atomic batches "
                                   "(needs nats-server 2.12+ and allow_atomic); nothing was written"]) from None
            await self._allow_atomic()
            return await self._publish_batch(plan)

    async def _publish_batch(self, plan: list[Message]) -> tuple[int, int]:
        nc, _ = await self._connection()
        batch = uuid.uuid4().hex
        n = len(plan)
        for i, msg in enumerate(plan, 1):
            subject, body = msg.subject, msg.body
            headers = _headers(msg, {BATCH_ID: batch, BATCH_SEQUENCE: str(i), MSG_ID: msg.msg_id})
            if i == n:
                headers[BATCH_COMMIT] = "1"
                ack = await self._request(subject, body, headers)
                if ack.get("batch") != batch or int(ack.get("count", 0)) != n:
                    raise AppendError([f"the batch's acknowledgement does not match it ({ack}); replay to see "
                                       "whether it was written"])
                last = int(ack["seq"])
                return last - n + 1, last
            if i == 1:
                await self._request(subject, body, headers, first_of_batch=True)
            else:
                try:
                    await nc.publish(subject, body, headers=headers)
                except (nats.errors.Error, OSError) as err:
                    raise AppendError([f"cannot publish to {subject}: {err or type(err).__name__}; the batch "
                                       "was not committed: nothing was written"]) from err
        raise AssertionError("unreachable")

    async def _request(
        self, subject: str, body: bytes, headers: dict[str, str] | None, first_of_batch: bool = False
    ) -> dict[str, Any]:
        """Publish and read the acknowledgement; raise what a refusal means."""
        nc, _ = await self._connection()
        try:
            reply = await nc.request(subject, body, timeout=self.target.timeout, headers=headers)
        except nats.errors.NoRespondersError as err:
            raise AppendError([f"no stream takes {subject} (is stream {self.target.stream} there?); "
                               "nothing was written"]) from err
        except (nats.errors.TimeoutError, TimeoutError) as err:
            if first_of_batch:
                raise AppendError([f"no acknowledgement from {self.server} in {self.target.timeout:g} s; the batch "
                                   "was not committed: nothing was written"]) from err
            raise _Unsure(f"no acknowledgement from {self.server} in {self.target.timeout:g} s") from err
        except (nats.errors.Error, OSError) as err:
            raise AppendError([f"cannot publish to {subject}: {err or type(err).__name__}; nothing was written"]) \
                from err
        if first_of_batch and not reply.data:
            return {}
        try:
            resp = json.loads(reply.data)
        except ValueError as err:
            raise AppendError([f"JetStream answered {reply.data[:200]!r}; replay the log to see what was written"]) \
                from err
        error = resp.get("error")
        if error is None:
            return dict(resp)
        code = error.get("err_code")
        if code in LOST_RACE_CODES:
            raise _LostRace(error.get("description"))
        if code == DUPLICATE_IN_BATCH:
            raise _Duplicate(error.get("description"))
        if code in (10174, 10175) or "atomic publish" in str(error.get("description", "")).lower():
            raise _NoAtomic(error.get("description"))
        raise AppendError([f"JetStream refused the write: {error.get('description')} (err_code {code}); "
                           "nothing was written"])

    async def _allow_atomic(self) -> None:
        """Turn on ``allow_atomic`` on an existing stream (once)."""
        self._atomic_checked = True
        _, js = await self._connection()
        info = await self._info()
        if info is None:
            raise AppendError([f"no stream {self.target.stream}; nothing was written"])
        try:
            await js.update_stream(info.config.evolve(allow_atomic=True))
        except (nats.errors.Error, OSError) as err:
            raise AppendError([f"stream {self.target.stream} does not take atomic batches and could not be "
                               f"changed to ({err}); nothing was written"]) from err


def _headers(msg: Message, headers: dict[str, str]) -> dict[str, str]:
    """``headers`` and the expectations of ``msg``: its subject's last sequence, the stream's (both checked by the
    server: a publish whose expectation does not hold is a lost race)."""
    if msg.expected is not None:
        headers[EXPECTED_LAST_SUBJECT_SEQUENCE] = str(msg.expected)
    if msg.after is not None:
        headers[EXPECTED_LAST_SEQUENCE] = str(msg.after)
    return headers


def _body(obj: dict[str, Any], seq: int | None) -> bytes:
    """The message body of an event: ``type`` and ``ts`` first, then ``seq`` when it carries one (as a file
    appender writes it), then the rest."""
    if seq is not None:
        return _written(obj, seq, None)
    out = {"type": obj["type"], "ts": obj["ts"]}
    out.update(obj)
    return _encoder.encode(out)


#: Bytes of a message's ``max_payload`` kept for the headers an append sends (a batch's first message, with both
#: expectations, sends 242 at most).
HEADER_ROOM = 256


def over_payload(size: int, max_payload: int) -> str | None:
    """Why a body of ``size`` bytes cannot go in one message (None: it can): the server takes ``max_payload``
    bytes a message, headers included, and the append keeps :data:`HEADER_ROOM` of them for its headers."""
    room = max_payload - HEADER_ROOM
    if size <= room:
        return None
    return (f"{size} bytes, more than the {room} a message body may have here (the server takes {max_payload} "
            f"bytes a message, headers included; {HEADER_ROOM} are kept for the append's headers)")


async def _cancel_pending() -> None:
    """Cancel every other task of the running loop and wait for them (else each is reported destroyed at exit)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _api_text(err: APIError) -> str:
    return f"{err.description} (err_code {err.err_code})"


#: A timeout of the client, in words (its text is empty).
NO_ANSWER = "no answer in time"


def _words(err: BaseException) -> str:
    """An error of the client in words (its text, else its kind)."""
    if isinstance(err, TimeoutError):
        return NO_ANSWER
    return str(err) or type(err).__name__


# --- export and import ------------------------------------------------------------------------


def export_line(seq: int, data: bytes) -> bytes:
    """A message as a file line (without the newline): an event without ``seq`` gets the stream sequence.

    The message's bytes are kept (every value as written, never parsed and written again; a key given
    twice stays twice, for the reader to name); ``seq`` goes after ``type`` and ``ts`` when the message
    starts with them as the appender writes them (so the line is the file appender's), else last.
    """
    raw = data.replace(b"\n", b" ") if b"\n" in data else data
    if deeper_at(raw) is not None:  # a bad line in any case (the reader names it), never decoded here
        return raw
    try:
        obj = _untyped.decode(raw)
    except msgspec.DecodeError:
        return raw
    if not isinstance(obj, dict) or "seq" in obj or isinstance(check_object(dict(obj)), str):
        return raw
    head = _encoder.encode({k: obj[k] for k in ("type", "ts") if k in obj})[:-1] + b","
    if raw.startswith(head):
        return head + b'"seq":%d,' % seq + raw[len(head):]
    return raw.rstrip(b" \t\r")[:-1] + b',"seq":%d}' % seq


def export(log: JetStreamLog, out: IO[bytes]) -> int:
    """Write every message as one line, in stream order; returns how many."""
    n = 0
    for seq, _subject, data in log.messages():
        out.write(export_line(seq, data) + b"\n")
        n += 1
    return n


@dataclass
class ImportReport:
    """What ``import-log`` did."""

    imported: int = 0
    bad_lines: int = 0
    torn_tail: bool = False
    first_seq: int = 0
    last_seq: int = 0
    error: str | None = None
    #: The complete lines of an unfinished batch at the end, left out (part of ``torn_tail``), if any.
    unfinished: Uncommitted | None = None
    #: The file ends in a torn last line (no newline), left out (part of ``torn_tail``).
    torn_line: bool = False

    @property
    def unfinished_lines(self) -> int:
        """How many complete lines of an unfinished batch were left out (0: none)."""
        return 0 if self.unfinished is None else self.unfinished.lines


def import_log(source: IO[bytes], log: JetStreamLog, window: int = 2000) -> ImportReport:
    """Publish every complete line of ``source`` in order into the EMPTY stream of ``log`` (created if needed).

    Line N becomes stream sequence N: each message expects the one before it
    (``Nats-Expected-Last-Sequence``), so nothing can slip in between. A line that
    is not an event goes to ``<prefix>.bad`` as it is; a torn last line (``torn_line``)
    and the complete lines of an unfinished batch at the end (``unfinished``) are left
    out, as a replay leaves them out (``torn_tail``). Raises :class:`LogUnavailable`
    when the stream is not empty or drops messages by itself.
    """
    info = log._run(log._ensure_stream())
    log.writable(info)
    if info.state.last_seq != 0:
        raise LogUnavailable(f"{log.name}: stream {log.target.stream} is not empty ({info.state.messages} "
                             f"message(s), last seq {info.state.last_seq}): import-log writes only into an empty "
                             "stream")
    report = ImportReport()
    reader = Reader()
    pending: deque[tuple[int, bytes, str]] = deque()

    def flush() -> bool:
        batch = list(pending)
        pending.clear()
        error = log._run(_publish_lines(log, batch))
        if error is not None:
            report.error = error
            return False
        report.imported += len(batch)
        return True

    batch: list[tuple[int, bytes, str]] = []  # the lines of a batch whose last line has not come yet
    batch_seq = batch_end = 0  # its first seq, the seq it was to end at
    for n, (raw, _end, complete) in enumerate(iter_lines(source), 1):
        if not complete:
            report.torn_line = True
            break
        decoded = reader.decode(raw, n)
        if isinstance(decoded, str):
            subject = f"{log.prefix}.bad"
            report.bad_lines += 1
            end = None
        else:
            subject = subject_of(log.prefix, decoded[0])
            end = decoded[0].batch_end
        if end is not None and end > reader.last_seq:
            if not batch:
                batch_seq, batch_end = reader.last_seq, end
            batch.append((n, raw, subject))  # held, as a replay holds it, until its last line
            continue
        pending.extend(batch)  # a batch that ended here, or one another line interrupted (bad lines either way)
        batch.clear()
        pending.append((n, raw, subject))
        if len(pending) >= window and not flush():
            break
    if batch and report.error is None:  # an unfinished batch at the end: not committed, not imported
        report.unfinished = Uncommitted(len(batch), batch_seq, batch_end, batch[0][0], report.torn_line)
    report.torn_tail = report.torn_line or report.unfinished is not None
    if pending and report.error is None:
        flush()
    if report.imported:
        report.first_seq, report.last_seq = 1, report.imported
    return report


async def _publish_lines(log: JetStreamLog, batch: list[tuple[int, bytes, str]]) -> str | None:
    """Publish lines pipelined, line N expecting sequence N-1; the first failure, or None."""
    nc, _ = await log._connection()
    inbox = nc.new_inbox()
    replies: dict[int, Msg] = {}
    complete = asyncio.Event()

    async def take(msg: Msg) -> None:
        replies[int(msg.subject.rsplit(".", 1)[1])] = msg
        if len(replies) == len(batch):
            complete.set()

    sub = await nc.subscribe(f"{inbox}.*", cb=take)
    try:
        for n, raw, subject in batch:
            too_big = over_payload(len(raw), nc.max_payload)
            if too_big is not None:
                return f"line {n}: {too_big}"
            await nc.publish(subject, raw, reply=f"{inbox}.{n}", headers={EXPECTED_LAST_SEQUENCE: str(n - 1)})
        try:
            await asyncio.wait_for(complete.wait(), log.target.timeout)
        except TimeoutError:
            pass
    finally:
        await sub.unsubscribe()
    for n, _raw, _subject in batch:
        msg = replies.get(n)
        if msg is None:
            return f"line {n}: no acknowledgement in {log.target.timeout:g} s"
        if not msg.data:
            status = (msg.headers or {}).get("Status")
            return f"line {n}: no stream takes it" if status == "503" else f"line {n}: status {status}"
        resp = json.loads(msg.data)
        if "error" in resp:
            return f"line {n}: {resp['error'].get('description')} (err_code {resp['error'].get('err_code')})"
        if int(resp.get("seq", 0)) != n:
            return f"line {n}: stored as seq {resp.get('seq')}"
    return None


# --- follow and snapshots ---------------------------------------------------------------------------


class Snapshot(msgspec.Struct):
    """A saved stream state: the projections' version, the stream's identity, the position, the state.

    ``state`` is the replay's typed state (:func:`eventlog.snapshot.encode_state`), decoded last.
    """

    format: int
    version: str
    stream: str
    created: str | None
    read_to: int
    last_sha256: str
    subjects: dict[str, int]
    state_crc32: int
    state: memoryview


#: Format 1 held untyped state: it is never read again.
SNAPSHOT_FORMAT = 2


def _version(replay: Replay) -> str:
    return "jetstream/" + snapshot.folder_version(replay)


def save_snapshot(path: str, log: JetStreamLog, state: StreamState) -> None:
    """Write ``state`` to ``path`` atomically, with what proves it belongs to the stream.

    :class:`eventlog.snapshot.NotSaved` when msgpack cannot hold the state or the file cannot be written;
    LogUnavailable when the stream cannot be read.
    """
    data = snapshot.encode_state(state.replay)
    last = b""
    if state.read_to:
        got = log._run(log._get_next(state.read_to))
        last = got[2] if got is not None and got[0] == state.read_to else b""
    snap = Snapshot(SNAPSHOT_FORMAT, _version(state.replay), log.target.stream, state.created, state.read_to,
                    hashlib.sha256(last).hexdigest(), state.subjects, zlib.crc32(data), memoryview(data))
    snapshot.write_cache(path, msgspec.msgpack.encode(snap))


def load_snapshot(path: str, log: JetStreamLog, fresh: Replay) -> tuple[StreamState | None, str]:
    """The state saved at ``path`` (in ``fresh``) if it still belongs to the stream and the code; else None and why."""
    snap, unread = snapshot.read(path, Snapshot, SNAPSHOT_FORMAT)
    if snap is None:
        return None, unread
    if snap.version != _version(fresh):
        return None, f"snapshot {path} was written by another version"
    info = log.info()
    created = info.created.isoformat() if info is not None and info.created else None
    if info is None or snap.stream != log.target.stream or snap.created != created:
        return None, f"snapshot {path} belongs to another stream (the stream was replaced)"
    if info.state.last_seq < snap.read_to:
        return None, f"snapshot {path} is ahead of the stream"
    if snap.read_to:
        got = log._run(log._get_next(snap.read_to))
        data = got[2] if got is not None and got[0] == snap.read_to else b""  # b"": gone, as when it was saved
        if hashlib.sha256(data).hexdigest() != snap.last_sha256:
            return None, f"snapshot {path} does not match the stream's message {snap.read_to}"
    if zlib.crc32(snap.state) != snap.state_crc32:
        return None, f"snapshot {path} is damaged (its state does not match its CRC-32)"
    why = snapshot.decode_state(snap.state, fresh)
    if why is not None:
        return None, f"snapshot {path} is refused: {why}"
    if fresh.line > snap.read_to:
        return None, f"snapshot {path} state does not match its position"
    return StreamState(fresh, snap.created, snap.read_to, snap.subjects), "ok"


def committed(path: str, log: JetStreamLog) -> int | None:
    """How many committed lines (events) the snapshot at ``path`` says the stream held when it was saved, whatever
    version of the code saved it; None when it cannot tell. It tells for a snapshot of a stream of this name only
    (one replaced since included: the lines it held that the new one lacks vanished), undamaged, in this format.
    :meth:`StreamFollower.start` counts the lines that vanished while no follow ran from it, as a file's follower
    does (:func:`eventlog.snapshot.committed`)."""
    snap, _why = snapshot.read(path, Snapshot, SNAPSHOT_FORMAT)
    if snap is None or snap.stream != log.target.stream:
        return None
    return snapshot.events_in(snap.state, snap.state_crc32)


def replay_from_snapshot(log: JetStreamLog, path: str, tz: tzinfo | None, strict: bool,
                         report: Callable[[str], None], save: bool = True) -> Replay:
    """Start from the snapshot when it matches, read the rest, save the snapshot again (``save``: else not)."""
    fresh = Replay(log.new_folder(), tz)
    state, why = load_snapshot(path, log, fresh)
    if state is None:
        if why != "no snapshot":
            report(f"{why}; replaying from the start")
        info = log.info()
        if info is None:
            raise LogUnavailable(f"{log.name}: no stream {log.target.stream}")
        state = StreamState(fresh, info.created.isoformat() if info.created else None)
    last = log._last_seq()
    for seq, subject, data in log.messages(state.read_to + 1, last):
        state.fold(seq, subject, data, strict)
    state.read_up_to(last)
    if not save:
        return state.replay
    try:
        save_snapshot(path, log, state)
    except OSError as err:
        report(f"cannot save the snapshot {path}: {err.strerror or err}")
    except snapshot.NotSaved as err:
        report(f"snapshot {path} not saved: {err}")
    return state.replay


class StreamFollower:
    """A stream's folded state kept level with it by an ordered consumer (``eventlog follow nats://...``).

    While the server cannot be reached, :attr:`unreachable` says since when and why, and the state
    stays as it was; :func:`follow` attaches again (catches up, subscribes) once it is back. A stream that is
    not on the server (not yet, or not any more) is ``missing``, its state that of an empty log, as a file
    follower's (:class:`eventlog.follow.Follower`); committed lines it held that are not there once it is back
    (a server that lost its store, a stream deleted and made again), or that the ``--snapshot`` held, go into
    :attr:`vanished` (:func:`eventlog.follow.vanished_since`, the file's rule).
    """

    def __init__(self, log: JetStreamLog, snapshot_path: str | None = None) -> None:
        self.log = log
        self.path = log.name
        self.snapshot_path = snapshot_path
        #: Why the snapshot was not saved the last time it was to be (None: it was, or not yet).
        self.unsaved: str | None = None
        #: What the snapshot holds (:meth:`snapshot_mark` when it was loaded or last saved; None: not known).
        self.saved: object = None
        self.state = StreamState(Replay(log.new_folder(), log.assume_tz))
        #: Set while the server cannot be reached: since when, why, and the last sequence folded.
        self.unreachable: LogUnreachable | None = None
        #: The server holds no such stream (not yet, or not any more): it is waited for.
        self.missing = False
        #: What is there instead of the log (a file follower's; a stream has nothing of the kind).
        self.not_file: str | None = None
        #: Committed lines that vanished while the stream was followed, or while no follow ran (its snapshot held
        #: them); kept until the process ends.
        self.vanished: LinesVanished | None = None
        #: The committed lines folded (or held by the snapshot) before the stream went or was replaced, until the
        #: stream is read from its start again.
        self._lines_before: int | None = None
        self._inbox: deque[tuple[int, str, bytes]] = deque()
        self._arrived = threading.Event()
        self._started = False
        self._sub: Any = None
        #: The log's :attr:`JetStreamLog.connects` when the consumer was made (a new connection needs a new one).
        self._on_connect = 0

    @property
    def replay(self) -> Replay:
        """The folded state."""
        return self.state.replay

    @property
    def attached(self) -> bool:
        """Whether an ordered consumer delivers the stream's new messages, on the connection that is up now."""
        return self._sub is not None and self.log.connected and self.log.connects == self._on_connect

    def start(self) -> str | None:
        """Load the snapshot when it matches, then catch up; a note for a person, if any.

        A snapshot of this stream that does not match it (the stream was replaced, ...) is the state of a follow
        that ran before: the committed lines it held that the stream no longer holds go into ``vanished``.
        """
        note = None
        if self.snapshot_path:
            loaded, why = load_snapshot(self.snapshot_path, self.log, Replay(self.log.new_folder(), self.log.assume_tz))
            if loaded is not None:
                self.state = loaded
                self.saved = self.snapshot_mark()
            elif why != "no snapshot":
                note = f"{why}; replaying from the start"
                if self._lines_before is None:
                    self._lines_before = committed(self.snapshot_path, self.log)
        self._catch_up()
        return note

    def catch_up(self) -> None:
        """Fold what the stream holds after the state now (back in touch with the server); a stream replaced
        meanwhile is read from its start, the committed lines it lost counted (``vanished``). :class:`NoStream`
        when the server holds no such stream."""
        self._catch_up()

    def _catch_up(self) -> None:
        info = self.log.info()
        if info is None:  # gone since it was asked: no read of an empty stream counts its lines as vanished
            raise NoStream(self.why_missing())
        before = self.state
        self.state = self.log.catch_up(before, info)
        if self.state is not before and self._lines_before is None:
            self._lines_before = before.replay.events
        self._lines_before, before_lines = None, self._lines_before
        self.vanished = vanished_since(self.vanished, before_lines, self.state.replay.events)

    def absent(self) -> bool:
        """The server holds no such stream: the state is dropped (that of an empty log, as a file follower's), the
        committed lines folded kept count of for when it is back; whether that is news."""
        if self.missing:
            return False
        if self._lines_before is None and self.state.replay.events:
            self._lines_before = self.state.replay.events
        self.state = StreamState(Replay(self.log.new_folder(), self.log.assume_tz))
        self.missing, self.unreachable = True, None  # the server answered
        return True

    def same_stream(self) -> bool:
        """Whether the server still holds the stream folded, up to where it was read (one info request): a stream
        deleted while the connection stays up sends nothing, and the consumer says nothing either. False when the
        server cannot be asked."""
        try:
            info = self.log.info()
        except LogUnavailable:
            return False
        created = info.created.isoformat() if info is not None and info.created else None
        return info is not None and created == self.state.created and info.state.last_seq >= self.state.read_to

    def why_missing(self) -> str:
        """Why the stream is not followed now, for a person (while ``missing``)."""
        stream, server = self.log.target.stream, self.log.server
        return f"{self.path}: no stream {stream} on {server} (yet, or any more); waiting for it"

    def attach(self) -> str | None:
        """Start (the first time: :meth:`start`) or catch up, then subscribe from the next sequence; a note for a
        person, if any. :class:`Unreachable` when the server cannot be reached; :class:`NoStream` when there is no
        such stream (``missing`` is then the caller's to set: :meth:`absent`)."""
        self.detach()
        if self.log.info() is None:
            raise NoStream(self.why_missing())
        came, self.missing = self.missing, False
        note = None
        if self._started:
            self.catch_up()
        else:
            note = self.start()
            self._started = True
        if came:
            note = f"{self.path}: stream {self.log.target.stream} is there now; following it" + (
                f" ({note})" if note else "")
        self._inbox.clear()  # what an earlier consumer left: the catch-up read it
        self._on_connect = self.log.connects
        self._sub = self.log._run(self._subscribe(self.state.read_to + 1))
        return note

    def detach(self) -> None:
        """Stop the consumer (best effort: the connection may be down)."""
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                self.log._run(sub.unsubscribe(), timeout=self.log.target.timeout)
            except Exception:  # noqa: BLE001, S110 - a consumer on a lost connection is the server's to drop
                pass

    def lose(self, why: str) -> bool:
        """The server cannot be reached (``why``): noted with the time and the last sequence folded, the first
        time; whether that is news."""
        if self.unreachable is not None:
            return False
        self.unreachable = LogUnreachable(since=clock.now().isoformat(timespec="seconds"), reason=why,
                                          seq=self.state.read_to)
        return True

    def regain(self) -> None:
        """The server is back and the state caught up with it."""
        self.unreachable = None

    def dump(self, at: datetime | None = None, at_text: str | None = None) -> dict[str, Any]:
        """The dump ``tools/replay --at AT LOG`` would print now (no ``at``: as of the last line)."""
        return self.state.replay.dump(self.path, at, at_text)

    def snapshot_mark(self) -> object:
        """What a snapshot saved now would hold: the stream (when it was made) and the last sequence read."""
        return self.state.created, self.state.read_to

    def save_snapshot(self) -> str | None:
        """Write the snapshot (if one was asked for); why it was not saved, if so (a state msgpack cannot hold, a
        file that cannot be written: a cache not saved is no error); LogUnavailable when the stream cannot be read
        (:class:`Unreachable`: its server cannot be reached; :func:`follow` saves it once it is back)."""
        if self.snapshot_path:
            try:
                save_snapshot(self.snapshot_path, self.log, self.state)
            except snapshot.NotSaved as err:
                return f"snapshot {self.snapshot_path} not saved: {err}"
        return None

    async def _subscribe(self, start: int) -> Any:
        _, js = await self.log._connection()

        async def take(msg: Msg) -> None:
            if msg.reply:
                seq, _pending = _position(msg.reply)
                self._inbox.append((seq, msg.subject, msg.data))
                self._arrived.set()

        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
        try:
            return await js.subscribe(f"{self.log.prefix}.>", stream=self.log.target.stream, ordered_consumer=True,
                                      cb=take, config=config)
        except (nats.errors.Error, OSError) as err:
            raise self.log._failed(err, f"a consumer from seq {start}") from err

    def drain(self) -> int:
        """Fold what arrived; how many messages."""
        n = 0
        while self._inbox:
            seq, subject, data = self._inbox.popleft()
            if seq > self.state.read_to:
                self.state.fold(seq, subject, data)
                n += 1
        return n


def follow(
    follower: StreamFollower,
    on_change: Callable[[StreamFollower], None],
    report: Callable[[str], None],
    stop: threading.Event | None = None,
    snapshot_every_s: float = 10.0,
    tick_s: float = TICK_S,
) -> None:
    """Catch up, call ``on_change``, then again after every delivery until ``stop`` is set (SIGINT/SIGTERM).

    With no delivery, ``on_change`` is called again at most ``tick_s`` after the previous call began (judged
    again, as a file's :func:`eventlog.follow.follow`, on one :class:`~eventlog.follow.Schedule`). A server that
    cannot be reached, at the start or later, is waited for, for ever: said once (``report``, and the follower's
    ``unreachable`` for ``on_change``) with the state kept as it was; once it is back, the stream is read up to its
    last sequence at once (an ordered consumer alone took 10 to 17 s to resume), followed again, and that is said.
    A stream that is not on the server, at the start or later, is waited for the same way (the follower's
    ``missing``: :meth:`StreamFollower.absent`), and read from its start once it is there; every tick with no
    delivery asks whether the stream is still the one folded (:meth:`StreamFollower.same_stream`). LogUnavailable for a
    stream that cannot be followed (another prefix, not an event log).
    """
    import signal

    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    wake = wake_ms(tick_s) / 1000
    schedule = Schedule(tick_s, time.monotonic())
    saved = time.monotonic()
    retry_at, backoff = 0.0, RECONNECT_FIRST_S
    try:
        while not stop.is_set():
            changed = False
            if follower.attached:
                if follower._arrived.wait(wake):
                    follower._arrived.clear()
                    changed = follower.drain() > 0
                elif schedule.due(time.monotonic()) and not follower.same_stream():
                    follower.detach()  # attached again at once: gone (waited for), replaced (read from its start)
                    continue
            elif follower._sub is not None or time.monotonic() >= retry_at:
                try:
                    note = follower.attach()
                except Unreachable as err:
                    follower.detach()
                    changed = _unreachable(follower, str(err), report)
                    # while the client connects again by itself, a try costs nothing; a new connection backs off
                    retry_at = time.monotonic() + (wake if follower.log.reconnecting else backoff)
                    backoff = backoff if follower.log.reconnecting else min(RECONNECT_MAX_S, 2 * backoff)
                except NoStream:
                    follower.detach()
                    changed = follower.absent()
                    if changed:
                        report(f"{follower.why_missing()} (the dump holds the counts of an empty log meanwhile)")
                    retry_at = time.monotonic() + MISSING_RETRY_S  # one info request: the server answers
                else:
                    backoff = RECONNECT_FIRST_S
                    if note:
                        report(note)
                    if follower.unreachable is not None:
                        follower.regain()
                        report(f"{follower.path}: the server is back; caught up to seq {follower.state.read_to}")
                    changed = True
            else:
                stop.wait(wake)
            if follower.snapshot_path and time.monotonic() - saved > snapshot_every_s:
                changed = _keep_snapshot(follower, report) or changed
                saved = time.monotonic()
            if changed or schedule.due(time.monotonic()):
                schedule.judge(on_change, follower)
    finally:
        follower.detach()
    _keep_snapshot(follower, report)


def _unreachable(follower: StreamFollower, why: str, report: Callable[[str], None]) -> bool:
    """Note that the server cannot be reached; say it the first time (the dump stays as of the last sequence)."""
    if not follower.lose(why):
        return False
    report(f"{follower.path}: the server is unreachable; the dump stays as of seq {follower.state.read_to} until it "
           f"is back (trying again for ever): {why}")
    return True


def _keep_snapshot(follower: StreamFollower, report: Callable[[str], None]) -> bool:
    """Save the snapshot (:func:`eventlog.follow.keep_snapshot`), not while the server cannot be reached (it holds
    the hash of the last message folded, read there: it is saved once the server is back); whether the server was
    found unreachable meanwhile (said as :func:`_unreachable` says it). Nor before the stream was first read, nor while
    it is not on the server (``missing``: the snapshot of what it held stays, to count what vanished)."""
    if follower.unreachable is not None or follower.missing or not follower._started:
        return False
    try:
        keep_snapshot(follower, report)
    except Unreachable as err:
        follower.detach()
        return _unreachable(follower, str(err), report)
    return False


__all__ = [
    "DEFAULT_PREFIX",
    "KINDS",
    "LOST_RACE_CODES",
    "MAX_BATCH",
    "ImportReport",
    "JetStreamLog",
    "NoStream",
    "StreamFollower",
    "StreamState",
    "Target",
    "committed",
    "decode_id",
    "encode_id",
    "export",
    "export_line",
    "follow",
    "import_log",
    "parse_url",
    "replay_from_snapshot",
    "subject_of",
]
