"""The HTTP routes of ``eventlog serve`` (spec: OUTPUTS.md, "Operator HTTP API"), on Starlette.

Every route is a thin shell over :class:`~eventlog.serve.served.Served`: it
checks the key and its scope first (a request without the right key reaches
no rule and writes nothing), decodes the body with msgspec (strict: an unknown
or missing field is ``400 BAD_REQUEST``), calls one function, and encodes the
answer with msgspec. Errors are ``{"code", "message"}`` (a refused decision
adds ``"receipt"``); keys are never logged or echoed.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog import keys as keyfile
from eventlog.appender import HTTP_NO_OFFSET_ADVICE, AppendError, BadInput, Conflict, read_input
from eventlog.clock import At, parse_at
from eventlog.printable import script as escape_script
from eventlog.reader import duplicate_key
from eventlog.runners import sessions as decisions
from eventlog.runners.common import RunnerError
from eventlog.serve.served import LogReplaced, Served, Unavailable

log = logging.getLogger("eventlog.serve")

#: Bodies over this are refused with 413 before they are read whole.
MAX_BODY = 1 << 20
#: How often an event stream says it is alive (and re-judges "now") when nothing changes.
TICK_S = 5.0
#: ``/v1/events`` writes its events in pieces of at least this many bytes (uvicorn's high-water mark), not one by one.
WRITE_BYTES = 1 << 16
CONSOLE = Path(__file__).resolve().parent / "console"


class DecisionBody(msgspec.Struct, forbid_unknown_fields=True):
    """``POST /v1/sessions/{id}/recovery-decisions`` (seed 004); the key comes in ``Idempotency-Key``."""

    decision: str
    expected_revision: int
    reason: str
    target_turn_id: str | None = None
    evidence_ref: str | None = None


class Problem(msgspec.Struct, omit_defaults=True):
    """An error answer."""

    code: str
    message: str
    problems: list[str] = msgspec.field(default_factory=list)
    receipt: dict[str, Any] | None = None


class Appended(msgspec.Struct):
    """``POST /v1/events``: what was written."""

    written: int
    first_seq: int
    last_seq: int


_encoder = msgspec.json.Encoder()


class JSON(Response):
    """A JSON answer encoded by msgspec, never cached."""

    media_type = "application/json"

    def __init__(self, content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> None:
        super().__init__(content, status_code, {"cache-control": "no-store", **(headers or {})})

    def render(self, content: Any) -> bytes:
        return _encoder.encode(content)


def problem(status: int, code: str, message: str, headers: dict[str, str] | None = None, **more: Any) -> JSON:
    """An error answer ``{"code", "message", ...}``."""
    return JSON(Problem(code=code, message=message, **more), status, headers)


# --- keys -------------------------------------------------------------------------


class KeysUnusable(Exception):
    """The key file cannot be used now (503 ``KEY_FILE_UNUSABLE``): no request that needs a key is let in."""


class KeyStore:
    """The key file, read again when it changes (a key added or removed takes effect without a restart).

    Changed is another :func:`~eventlog.keys.stamp` than at the last read (a ``chmod`` of the file or of its
    directory too); a file that could not be stat'ed is read again as soon as it can be, changed or not. Each
    change of what is wrong (unusable, or readable by others) is said once in the server's log (the first
    read's, ``eventlog serve`` says at start), and so is a file that can be used again.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, ...] | None = None
        self._keys = keyfile.Keys()
        self._error: str | None = None
        self._warnings: list[str] = []
        self._read()

    def current(self) -> keyfile.Keys:
        """The keys now; KeysUnusable when the file cannot be used (no request is let in then)."""
        error, warnings = self._error, self._warnings
        self._read()
        if self._error is not None and self._error != error:
            log.error("%s", self._error)
        elif self._error is None and error is not None:
            log.warning("key file %s can be used again (%d key(s))", self.path, len(self._keys.keys))
        for warning in self._warnings:
            if warning not in warnings:
                log.warning("%s", warning)
        if self._error is not None:
            raise KeysUnusable(self._error)
        return self._keys

    def _read(self) -> None:
        """Read the file again when it changed or could not be stat'ed last time."""
        try:
            stamp = keyfile.stamp(self.path)
        except OSError as err:
            self._stamp = None  # the same file put back is read again
            self._keys, self._warnings = keyfile.Keys(), []
            self._error = f"cannot read key file {self.path}: {err.strerror or err}"
            return
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            (self._keys, self._warnings), self._error = keyfile.serving(self.path), None
        except keyfile.KeyError_ as err:
            self._keys, self._warnings, self._error = keyfile.Keys(), [], str(err)


Endpoint = Callable[[Request], Awaitable[Response]]


def guarded(scope: str | None) -> Callable[[Endpoint], Endpoint]:
    """The route needs a key with ``scope`` (None: no key); a 503 when the log (``LOG_UNAVAILABLE``) or the key
    file (``KEY_FILE_UNUSABLE``) cannot be used."""

    def wrap(fn: Endpoint) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            try:
                if scope is not None:
                    refused = authorize(request, scope)
                    if refused is not None:
                        return refused
                return await fn(request)
            except KeysUnusable as err:
                return problem(503, "KEY_FILE_UNUSABLE", str(err))
            except Unavailable as err:
                return problem(503, "LOG_UNAVAILABLE", str(err))

        endpoint.__name__ = fn.__name__
        endpoint.__doc__ = fn.__doc__
        return endpoint

    return wrap


def authorize(request: Request, scope: str) -> Response | None:
    """401 without a known key, 403 without the scope; else None (``request.state.key`` is the key)."""
    header = request.headers.get("authorization", "")
    kind, _, presented = header.partition(" ")
    found = None
    if kind.lower() == "bearer" and presented.strip():
        found = request.app.state.keys.current().find(presented.strip())
    if found is None:
        return problem(401, "UNAUTHORIZED", "send Authorization: Bearer KEY with a key of this server",
                       {"www-authenticate": 'Bearer realm="eventlog"'})
    if scope not in found.scopes:
        return problem(403, "FORBIDDEN", f"the key {found.name!r} does not have the scope {scope!r}")
    request.state.key = found
    request.state.scope = scope
    return None


def still_authorized(request: Request) -> bool:
    """Whether the key a request was let in with still has its scope (a removed key ends its open streams)."""
    scope = getattr(request.state, "scope", None)
    if scope is None:  # a route that needs no key
        return True
    try:
        return authorize(request, scope) is None
    except KeysUnusable:  # the key file cannot be used now: no key holds
        return False


# --- helpers ----------------------------------------------------------------------


def served(request: Request) -> Served:
    """The server's log."""
    s: Served = request.app.state.served
    return s


def judging(request: Request) -> At | Response:
    """``?at=TIME`` or ``?at=log`` (default now), or a 400 answer for a bad one."""
    s = served(request)
    try:
        return parse_at(request.query_params.get("at"), s.assume_tz)
    except ValueError as err:
        return problem(400, "BAD_REQUEST", str(err).replace("--at", "at"))


#: The values ``?all=`` takes (``status --all``), and what each means.
_ALL = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def every_item(request: Request) -> bool | Response:
    """``?all=1`` (every item of every group, as ``status --all``; ``?all=0`` or none: the first few), or a 400."""
    given = request.query_params.get("all")
    if given is None:
        return False
    wanted = _ALL.get(given.strip().lower())
    if wanted is None:
        return problem(400, "BAD_REQUEST", f"all={given!r}: give all=1 (every item) or all=0 (the first few)")
    return wanted


async def read_body(request: Request) -> bytes | Response:
    """The body, or 413 when it is over :data:`MAX_BODY` (told by its length, or counted while it comes)."""
    length = request.headers.get("content-length")
    too_big = problem(413, "PAYLOAD_TOO_LARGE", f"the body is over {MAX_BODY} bytes", {"connection": "close"})
    if length is not None:
        try:
            if int(length) > MAX_BODY:
                return too_big
        except ValueError:
            return problem(400, "BAD_REQUEST", "Content-Length is not a number")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return too_big
        chunks.append(chunk)
    return b"".join(chunks)


def wants_stream(request: Request) -> bool:
    """Whether the client asked for Server-Sent Events (``Accept: text/event-stream``)."""
    return "text/event-stream" in request.headers.get("accept", "")


def sse(event: str, data: bytes, ident: int | None = None) -> bytes:
    """One Server-Sent Event (``data`` holds no line break)."""
    head = f"event: {event}\n" + (f"id: {ident}\n" if ident is not None else "")
    return head.encode() + b"data: " + data + b"\n\n"


def tick_event(request: Request) -> bytes:
    """A view stream's first event, ``tick`` ``{"tick_s", "commands"}``: a view comes at least this often, so a
    client that gets none for a few ticks knows what it shows is not current, and says what to paste instead
    (:meth:`Served.commands`)."""
    return sse("tick", _encoder.encode({"tick_s": request.app.state.tick_s, "commands": served(request).commands()}))


def unavailable_event(s: Served, err: Unavailable) -> bytes:
    """``unavailable`` ``{"message", "since", "commands"}``: why the log cannot be judged now, since when, and
    what to paste instead (:meth:`Served.commands`)."""
    why, since = s.trouble() or (str(err), None)
    return sse("unavailable", _encoder.encode({"message": why, "since": since, "commands": s.commands()}))


def event_stream(request: Request, body: AsyncGenerator[bytes, None]) -> StreamingResponse:
    """A ``text/event-stream`` answer, which ends as soon as its client has left (:func:`until_left`)."""
    return StreamingResponse(until_left(request, body), media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


async def until_left(request: Request, body: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
    """``body``'s writes until the client has left; then ``body`` is closed (what it holds is freed), nothing said.

    uvicorn learns that a connection is lost on the event loop's next turn; a write before that goes to the dead
    socket, and asyncio says ``socket.send() raised exception.`` on stderr for each from the fifth on: a stream
    that wrote a batch of lines without a pause said it once per line. So the loop turns after every write, and
    the stream ends at the first that finds the client gone. A client that reads no more but stays connected
    holds its stream at the write that waits (uvicorn's flow control), not more.
    """
    async with aclosing(body):
        async for chunk in body:
            yield chunk
            await asyncio.sleep(0)  # the turn in which asyncio tells uvicorn of a write that failed
            if await request.is_disconnected():
                return


def joined(parts: Iterable[bytes], size: int = WRITE_BYTES) -> Iterator[bytes]:
    """``parts`` joined into pieces of at least ``size`` bytes (the last: the rest), each part whole."""
    piece: list[bytes] = []
    held = 0
    for part in parts:
        piece.append(part)
        held += len(part)
        if held >= size:
            yield b"".join(piece)
            piece, held = [], 0
    if piece:
        yield b"".join(piece)


async def changes(request: Request, version: int, timeout: float) -> bool:
    """Wait until the log changed after ``version`` (True) or ``timeout`` passed; False when the server stops or
    the request's key no longer holds (removed, or its scope taken away): the stream then ends."""
    state = request.app.state
    if state.stopping.is_set():
        return False
    if served(request).version == version:
        waiter = state.changed
        try:
            await asyncio.wait_for(waiter.wait(), timeout)
        except TimeoutError:
            pass
    return not state.stopping.is_set() and still_authorized(request)


# --- routes -----------------------------------------------------------------------


@guarded(None)
async def healthz(request: Request) -> Response:
    """200 while the server follows its log; 503 saying why not."""
    return JSON(await run_in_threadpool(served(request).health))


@guarded("read")
async def status(request: Request) -> Response:
    """The ``status --json`` view (``?all=1``: every item); with ``Accept: text/event-stream`` a stream of
    the console's view of it (``Served.console``), which says when the log cannot be judged instead of a 503.

    Its ``as_of`` is when it was judged: a judgement is reused for a second while the log has not moved, and
    past that the newest is answered while the next is made, so it may be up to ``--tick`` old, plus the time
    one judgement takes (``Served.judged``).
    """
    at = judging(request)
    if isinstance(at, Response):
        return at
    every = every_item(request)
    if isinstance(every, Response):
        return every
    s = served(request)
    if not wants_stream(request):
        return JSON(await run_in_threadpool(s.status, at, every=every))

    async def stream() -> AsyncGenerator[bytes, None]:
        yield tick_event(request)
        while True:
            version = s.version
            shown = await run_in_threadpool(s.console, at, every)
            yield sse("status", _encoder.encode(shown))
            if not await changes(request, version, request.app.state.tick_s):
                return

    return event_stream(request, stream())


@guarded("read")
async def dump(request: Request) -> Response:
    """The dump, as ``tools/replay --at`` would print it (judged now unless ``?at=``)."""
    at = judging(request)
    if isinstance(at, Response):
        return at
    j = await run_in_threadpool(served(request).judged, at)
    return JSON(j.dump)


@guarded("read")
async def session(request: Request) -> Response:
    """One session with the decisions it would accept now (a stream of it with ``Accept: text/event-stream``).

    The stream says ``gone`` ``{"message"}`` when the session is no longer in the log (replaced or
    truncated: the 404's message) and ``unavailable`` when the log cannot be judged, and goes on: the
    session may come back.
    """
    at = judging(request)
    if isinstance(at, Response):
        return at
    s = served(request)
    sid = request.path_params["session_id"]
    found = await run_in_threadpool(s.session, sid, at)
    if found is None:
        return problem(404, "NOT_FOUND", await run_in_threadpool(s.unknown_session, sid))
    if not wants_stream(request):
        return JSON(found)

    async def stream() -> AsyncGenerator[bytes, None]:
        yield tick_event(request)
        said = sse("session", _encoder.encode(found))
        while True:
            version = s.version
            yield said
            if not await changes(request, version, request.app.state.tick_s):
                return
            try:
                current = await run_in_threadpool(s.session, sid, at)
            except Unavailable as err:
                said = unavailable_event(s, err)
                continue
            if current is None:
                if not said.startswith(b"event: gone\n"):  # why it is unknown reads the log: once, not each tick
                    gone = await run_in_threadpool(s.unknown_session, sid)
                    said = sse("gone", _encoder.encode({"message": gone}))
            else:
                said = sse("session", _encoder.encode(current))

    return event_stream(request, stream())


@guarded("read")
async def turn(request: Request) -> Response:
    """One turn: its outcome and ``terminal_reason`` (seed 004)."""
    s = served(request)
    sid, tid = request.path_params["session_id"], request.path_params["turn_id"]
    found = await run_in_threadpool(s.turn, sid, tid)
    if found is None:
        return problem(404, "NOT_FOUND", f"{s.name}: no turn {tid!r} of session {sid!r}")
    return JSON(found)


@guarded("sessions:recover")
async def recovery_decision(request: Request) -> Response:
    """Seed 004's recovery decision: 200 with the receipt, 409 with the refusal's code, 404, 400.

    The receipt (a 409's too) carries the log's ``bad_lines`` and those that name the session, as ``decide --json``.
    """
    body = await read_body(request)
    if isinstance(body, Response):
        return body
    try:
        sent = msgspec.json.decode(body, type=DecisionBody)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        return problem(400, "BAD_REQUEST", f"body: {err}")
    repeated = duplicate_key(body)  # msgspec keeps the last value without a word
    if repeated is not None:
        return problem(400, "BAD_REQUEST", f"body: {repeated}")
    key = request.headers.get("idempotency-key", "")
    if not key.strip():
        return problem(400, "BAD_REQUEST", "the Idempotency-Key header is required (e.g. a new UUID per decision)")
    s = served(request)
    wanted = decisions.Decision(
        session_id=request.path_params["session_id"], decision=sent.decision,
        expected_revision=sent.expected_revision, idempotency_key=key, reason=sent.reason,
        target_turn_id=sent.target_turn_id, evidence_ref=sent.evidence_ref, actor=request.state.key.name,
    )
    try:
        done = await run_in_threadpool(s.decide, wanted, decisions.HTTP_NAMES)
    except decisions.UnknownId as err:
        return problem(404, "NOT_FOUND", str(err))
    except RunnerError as err:
        return problem(400, "BAD_REQUEST", str(err))
    except BadInput as err:  # a line the log cannot hold (a number past 64 bits, over 1 MiB): the CLI's exit 2
        return problem(400, "BAD_REQUEST", "; ".join(err.messages))
    except AppendError as err:
        return problem(503, "LOG_UNAVAILABLE", "; ".join(err.messages))
    receipt = {**done.receipt, "session": done.session, **done.bad_lines_fields()}
    if done.accepted:
        return JSON(receipt)
    code = str(done.receipt["result"])
    said = "; ".join(f"{label}: {words}" for label, words in decisions.refusal(done.receipt))
    return problem(409, code, said, receipt=receipt)


@guarded("events:append")
async def append_events(request: Request) -> Response:
    """``eventlog append`` over HTTP: a JSONL body, all lines or none, ``Expect-Revision``."""
    body = await read_body(request)
    if isinstance(body, Response):
        return body
    expect = request.headers.get("expect-revision")
    revision = None
    if expect is not None:
        try:
            revision = int(expect)
        except ValueError:
            return problem(400, "BAD_REQUEST", f"Expect-Revision {expect!r} is not an integer")
    given = read_input(io.BytesIO(body), "body", served(request).assume_tz, HTTP_NO_OFFSET_ADVICE)
    if given.problems:
        return problem(400, "BAD_REQUEST", f"{len(given.problems)} bad line(s); nothing was written",
                       problems=given.problems)
    try:
        done = await run_in_threadpool(served(request).append, given.events, revision)
    except BadInput as err:
        return problem(400, "BAD_REQUEST", "bad input; nothing was written", problems=given.named(err.messages))
    except Conflict as err:
        return problem(409, "CONFLICT", "refused; nothing was written", problems=given.named(err.messages))
    except AppendError as err:
        return problem(503, "LOG_UNAVAILABLE", "; ".join(err.messages))
    for i, words in given.wall_times:  # said as append says it, in the server's log
        log.warning("%s: %s: %s", served(request).name, given.where(i, done.first_seq), words)
    return JSON(Appended(written=done.written, first_seq=done.first_seq, last_seq=done.last_seq))


@guarded("read")
async def events(request: Request) -> Response:
    """New lines as Server-Sent Events: ``id`` is the line's ``seq``; ``after=SEQ`` (or ``Last-Event-ID``)."""
    s = served(request)
    text = request.headers.get("last-event-id") or request.query_params.get("after")
    after = None
    if text is not None:
        try:
            after = int(text)
        except ValueError:
            return problem(400, "BAD_REQUEST", f"after={text!r} is not a seq (an integer)")
    cursor = await run_in_threadpool(s.tail, after)

    async def stream() -> AsyncGenerator[bytes, None]:
        yield b": " + s.name.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n\n"
        while True:
            version = s.version
            try:
                lines = await run_in_threadpool(s.lines, cursor)
            except (LogReplaced, OSError, Unavailable) as err:
                yield sse("reset", _encoder.encode({"message": str(err)}))
                return
            for piece in joined(sse(kind, data, seq) for kind, seq, data in lines):  # a write per piece, not per line
                yield piece
            if lines:  # more may follow at once: the key is checked here as changes() checks it
                if not still_authorized(request):
                    return
                continue
            if not await changes(request, version, request.app.state.tick_s):
                return
            yield b": alive\n\n"

    return event_stream(request, stream())


@guarded("read")
async def metrics(request: Request) -> Response:
    """The Prometheus exposition of ``follow --prom`` (judged now unless ``?at=``)."""
    at = judging(request)
    if isinstance(at, Response):
        return at
    text = await run_in_threadpool(served(request).metrics, at)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8",
                    headers={"cache-control": "no-store"})


async def console(request: Request) -> Response:
    """The console's one page: what needs a person, or at /sessions/ID a session (it asks for a key)."""
    return FileResponse(CONSOLE / "index.html", headers={"cache-control": "no-store"})


async def console_escaping(request: Request) -> Response:
    """``/console/escape.js``: the CLI's escaping rule for the console (``eventlog.printable.script``)."""
    return Response(escape_script(), media_type="text/javascript; charset=utf-8",
                    headers={"cache-control": "no-store"})


# --- the application --------------------------------------------------------------

#: Ids that cannot be a path segment as they are: clients drop the segments ``.`` and ``..`` (a browser even
#: written ``%2E``) and an empty one names no route, so they are written ``.;``, ``..;`` and ``;`` (a raw ``;``
#: is never in a percent-encoded id: encoders write it ``%3B``). ``console.js: idSegment`` writes them so.
SPECIAL_SEGMENTS = {";": "", ".;": ".", "..;": ".."}


def segment_id(segment: str) -> str:
    """The id a path segment names: :data:`SPECIAL_SEGMENTS`, else the segment percent-decoded (UTF-8).

    ``segment`` is as sent (each byte one character): a ``%2F`` in it is a ``/`` of the id.
    """
    special = SPECIAL_SEGMENTS.get(segment)
    if special is not None:
        return special
    return unquote_to_bytes(segment.encode("latin-1")).decode("utf-8", "replace")


class IdRoute(Route):
    """A route whose ``{...}`` segments are ids, matched on the path as sent and decoded by :func:`segment_id`.

    Starlette matches the decoded path, where a ``%2F`` of an id has become a ``/`` that splits it
    (``/v1/sessions/s%2Fx`` was "no such route"); here it names the session ``s/x``.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] != "http" or raw is None:
            return super().matches(scope)
        match, child = super().matches({**scope, "path": raw.decode("latin-1")})
        if match is not Match.NONE:
            child["path_params"] = {name: segment_id(value) if name in self.param_convertors else value
                                    for name, value in child["path_params"].items()}
        return match, child


_PAGE_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                                 b"img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Every answer: no sniffing, no referrer, a strict content security policy (the console runs no inline code)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_PAGE_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


class Changed:
    """An asyncio event that is replaced after each set: ``await changed.wait()`` waits for the next change."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        """Wake everyone waiting now."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self) -> None:
        """Wait for the next :meth:`set`."""
        await self._event.wait()


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, a method the route does not take) as ``{"code", "message"}``."""
    assert isinstance(exc, HTTPException)
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
    message = {404: f"no such route: {request.method} {request.url.path}",
               405: f"{request.url.path} does not take {request.method}"}.get(exc.status_code, str(exc.detail))
    return problem(exc.status_code, code, message, dict(exc.headers or {}))


def make_app(served_log: Served, keys_path: str, *, tick_s: float = TICK_S) -> Starlette:
    """The ASGI application over a :class:`Served` log (started by the caller) and a key file."""
    routes = [
        Route("/healthz", healthz),
        Route("/v1/status", status),
        Route("/v1/dump", dump),
        IdRoute("/v1/sessions/{session_id}", session),
        IdRoute("/v1/sessions/{session_id}/turns/{turn_id}", turn),
        IdRoute("/v1/sessions/{session_id}/recovery-decisions", recovery_decision, methods=["POST"]),
        Route("/v1/events", append_events, methods=["POST"]),
        Route("/v1/events", events, methods=["GET"]),
        Route("/metrics", metrics),
        Route("/", console),
        IdRoute("/sessions/{session_id}", console),
        Route("/console/escape.js", console_escaping),
        Mount("/console", StaticFiles(directory=CONSOLE), name="console"),
    ]

    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        app.state.loop = loop
        app.state.changed = Changed()
        app.state.stopping = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(app.state.changed.set)

        served_log.listen(wake)
        yield

    app = Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)], lifespan=asynccontextmanager(lifespan),
                    exception_handlers={HTTPException: http_error})
    app.state.served = served_log
    app.state.keys = KeyStore(keys_path)
    app.state.tick_s = tick_s
    return app


def stopping(app: Starlette) -> None:
    """Tell the event streams to end (call from any thread, or a signal handler)."""
    loop = getattr(app.state, "loop", None)
    if loop is None:
        return

    def stop() -> None:
        app.state.stopping.set()
        app.state.changed.set()

    loop.call_soon_threadsafe(stop)


__all__ = ["MAX_BODY", "TICK_S", "Appended", "DecisionBody", "Problem", "make_app", "stopping"]
