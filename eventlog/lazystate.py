"""Folded state split for partial loading: what a sidecar holds, so an append decodes only what it touches.

A replay's state (:class:`~eventlog.replay.ReplayState` holding the folder's
``State``) is saved in three parts:

- ``core``: the state with every big container emptied (msgpack of the same
  typed struct: positions, counters, small maps);
- ``maps``: each big ``dict`` (more than :data:`SPLIT_OVER` entries: a
  projection's entities, a stream's revisions) as buckets, the entries of a
  key going to bucket ``crc32(key) % len(buckets)``, each bucket its own msgpack
  map of about :data:`BUCKET` entries;
- ``lists``: each big ``list`` (the lane checks, the receipts, latencies) as one
  msgpack array.

Loaded *eagerly* it is the whole state again. Loaded *lazily* (the
appender), a big map is a :class:`LazyMap` that decodes a bucket the first
time one of its keys is asked for, and a big list is a :class:`LazyList`
that decodes its old elements only when someone reads them (appending does
not): a checked append on a log of a million events and 100,000 entities
decodes a few buckets, not the 100,000 entities. Saving again re-encodes
only the buckets that were loaded and copies the others as they are.

The paths of the split containers are written in the file and checked
against the declared types on reading: a file naming a container the types
do not have is refused like any state that does not fit.
"""

from __future__ import annotations

import sys
import typing
import zlib
from collections.abc import Callable
from typing import Any

import msgspec

#: A dict or list with more entries than this is split out of the core.
SPLIT_OVER = 512
#: About this many entries per bucket of a split map.
BUCKET = 256
#: A dict with at most this many keys whose values are big dicts is split one level down (a stream's revisions).
FEW_KEYS = 16

_encoder = msgspec.msgpack.Encoder()

#: A path from the state to a container: attribute names (str) and dict keys (("key", k)).
Step = str | tuple[str, str]


class Split(msgspec.Struct, array_like=True):
    """A state in its three parts (see the module docstring)."""

    core: msgspec.Raw
    maps: list[tuple[list[Step], list[msgspec.Raw]]]
    lists: list[tuple[list[Step], msgspec.Raw]]


def _bucket(key: str, n: int) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % n


def _key_first(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of dict, after the bucket of its first argument (a key) is loaded."""
    def call(self: LazyMap, key: Any, *args: Any) -> Any:
        if self._left and isinstance(key, str):
            self._load(key)
        return method(self, key, *args)

    call.__name__ = method.__name__
    return call


def _all_first(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of dict or list, after everything is loaded."""
    def call(self: LazyMap | LazyList, *args: Any, **kwargs: Any) -> Any:
        self._load_all()
        return method(self, *args, **kwargs)

    call.__name__ = method.__name__
    return call


class LazyMap(dict[str, Any]):
    """A dict whose entries are decoded a bucket at a time, when one of the bucket's keys is first asked for.

    Reading through ``get``, ``[]``, ``in``, ``setdefault`` and ``pop`` decodes
    one bucket; iterating, ``len`` and the views decode them all. Writing a
    key decodes its bucket first, so a bucket is always whole once loaded.
    """

    def __init__(self, buckets: list[msgspec.Raw], decode: Callable[[msgspec.Raw], dict[str, Any]]) -> None:
        super().__init__()
        self._raw: list[msgspec.Raw | None] = list(buckets)
        self._decode = decode
        self._left = len(buckets)

    def _load(self, key: str) -> None:
        i = _bucket(key, len(self._raw))
        raw = self._raw[i]
        if raw is not None:
            self._raw[i] = None
            self._left -= 1
            dict.update(self, self._decode(raw))

    def _load_all(self) -> None:
        if self._left:
            for i, raw in enumerate(self._raw):
                if raw is not None:
                    self._raw[i] = None
                    dict.update(self, self._decode(raw))
            self._left = 0

    def parts(self) -> tuple[list[msgspec.Raw | None], dict[str, Any]]:
        """The buckets not loaded (None where loaded) and the loaded entries, for saving."""
        return self._raw, dict(dict.items(self))

    __getitem__ = _key_first(dict.__getitem__)
    get = _key_first(dict.get)
    __contains__ = _key_first(dict.__contains__)
    __setitem__ = _key_first(dict.__setitem__)
    __delitem__ = _key_first(dict.__delitem__)
    setdefault = _key_first(dict.setdefault)
    pop = _key_first(dict.pop)
    __iter__ = _all_first(dict.__iter__)
    __len__ = _all_first(dict.__len__)
    keys = _all_first(dict.keys)
    values = _all_first(dict.values)
    items = _all_first(dict.items)
    update = _all_first(dict.update)
    __eq__ = _all_first(dict.__eq__)
    __repr__ = _all_first(dict.__repr__)
    __hash__ = None

    def copy(self) -> dict[str, Any]:
        self._load_all()
        return dict(dict.items(self))


class LazyList(list[Any]):
    """A list whose old elements are decoded only when read; appending needs none of them."""

    def __init__(self, raw: msgspec.Raw, decode: Callable[[msgspec.Raw], list[Any]]) -> None:
        super().__init__()
        self._old: msgspec.Raw | None = raw
        self._decode = decode

    def _load_all(self) -> None:
        if self._old is not None:
            old, self._old = self._old, None
            list.__setitem__(self, slice(0, 0), self._decode(old))

    def parts(self) -> tuple[msgspec.Raw | None, list[Any]]:
        """The old elements not decoded (None when they were) and the elements held, for saving."""
        return self._old, list(list.__iter__(self))

    __iter__ = _all_first(list.__iter__)
    __reversed__ = _all_first(list.__reversed__)
    __len__ = _all_first(list.__len__)
    __getitem__ = _all_first(list.__getitem__)
    __contains__ = _all_first(list.__contains__)
    __eq__ = _all_first(list.__eq__)
    sort = _all_first(list.sort)
    __repr__ = _all_first(list.__repr__)
    __hash__ = None


# --- encoding -------------------------------------------------------------------------------------


def encode(state: msgspec.Struct, split_over: int | None = SPLIT_OVER) -> bytes:
    """``state`` (a struct, possibly holding lazy containers) as a :class:`Split`, msgpack.

    Containers of more than ``split_over`` entries are split out (None: only
    lazy ones, which must be). Raises what msgpack raises for a value it
    cannot hold (OverflowError, ValueError, TypeError).
    """
    maps: list[tuple[list[Step], list[msgspec.Raw]]] = []
    lists: list[tuple[list[Step], msgspec.Raw]] = []
    swapped: list[tuple[Any, Step, Any]] = []  # (parent, step, container) put back after the core is encoded
    over = sys.maxsize if split_over is None else split_over
    try:
        _walk(state, [], maps, lists, swapped, over)
        core = _encoder.encode(state)
    finally:
        for parent, step, container in reversed(swapped):
            _put(parent, step, container)
    return _encoder.encode(Split(msgspec.Raw(core), maps, lists))


def _walk(node: Any, path: list[Step], maps: list[tuple[list[Step], list[msgspec.Raw]]],
          lists: list[tuple[list[Step], msgspec.Raw]], swapped: list[tuple[Any, Step, Any]], over: int) -> None:
    for name in node.__struct_fields__:
        value = getattr(node, name)
        step: Step = name
        if isinstance(value, msgspec.Struct):
            _walk(value, [*path, step], maps, lists, swapped, over)
        elif isinstance(value, dict):
            _split_dict(node, step, value, [*path, step], maps, swapped, over)
        elif isinstance(value, list):
            _split_list(node, step, value, [*path, step], lists, swapped, over)


def _split_dict(parent: Any, step: Step, value: dict[str, Any], path: list[Step],
                maps: list[tuple[list[Step], list[msgspec.Raw]]], swapped: list[tuple[Any, Step, Any]],
                over: int) -> None:
    if isinstance(value, LazyMap) or dict.__len__(value) > over:
        maps.append((path, _buckets(value)))
        swapped.append((parent, step, value))
        _put(parent, step, {})
    elif dict.__len__(value) <= FEW_KEYS and all(isinstance(v, dict) for v in dict.values(value)):
        for key, inner in list(dict.items(value)):
            _split_dict(value, ("key", key), inner, [*path, ("key", key)], maps, swapped, over)


def _split_list(parent: Any, step: Step, value: list[Any], path: list[Step],
                lists: list[tuple[list[Step], msgspec.Raw]], swapped: list[tuple[Any, Step, Any]],
                over: int) -> None:
    if isinstance(value, LazyList):
        old, new = value.parts()
        items = new if old is None else [*msgspec.msgpack.decode(old, type=list[msgspec.Raw]), *new]
    elif list.__len__(value) > over:
        items = value
    else:
        return
    lists.append((path, msgspec.Raw(_encoder.encode(items))))
    swapped.append((parent, step, value))
    _put(parent, step, [])


def _buckets(value: dict[str, Any]) -> list[msgspec.Raw]:
    """The buckets of a map: a lazy map's unloaded ones as they are, the others encoded from the entries held.

    A map that grew well past its buckets (or was never split) is split anew,
    into about :data:`BUCKET` entries a bucket.
    """
    raw: list[msgspec.Raw | None] | None = None
    if isinstance(value, LazyMap):
        kept, held = value.parts()
        loaded = sum(r is None for r in kept)
        if kept and len(held) <= max(1, loaded) * BUCKET * 4:
            raw = kept
        else:
            value._load_all()
            held = dict(dict.items(value))
    else:
        held = dict(value)
    if raw is None:
        raw = [None] * max(1, len(held) // BUCKET)
    n = len(raw)
    groups: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, item in held.items():
        groups[_bucket(key, n)][key] = item
    return [r if (r := raw[i]) is not None else msgspec.Raw(_encoder.encode(groups[i])) for i in range(n)]


def _put(parent: Any, step: Step, value: Any) -> None:
    if isinstance(step, tuple):
        dict.__setitem__(parent, step[1], value)
    else:
        setattr(parent, step, value)


# --- decoding -------------------------------------------------------------------------------------


def decode(data: bytes | memoryview, state_type: Any, lazy: bool) -> Any:
    """A state of ``state_type`` from :func:`encode`'s bytes; lazy containers when ``lazy``.

    Raises msgspec.DecodeError or ValidationError for bytes that do not fit,
    ValueError for a path the types do not have.
    """
    split = msgspec.msgpack.decode(data, type=Split)
    state = _decoder(state_type).decode(split.core)
    for path, buckets in split.maps:
        parent, step, value_type = _resolve(state, state_type, path, dict)
        decoder = _decoder(dict[str, value_type])  # type: ignore[valid-type]
        if lazy:
            _put(parent, step, LazyMap(buckets, decoder.decode))
        else:
            whole: dict[str, Any] = {}
            for raw in buckets:
                whole.update(decoder.decode(raw))
            _put(parent, step, whole)
    for path, raw in split.lists:
        parent, step, item_type = _resolve(state, state_type, path, list)
        decoder = _decoder(list[item_type])  # type: ignore[valid-type]
        _put(parent, step, LazyList(raw, decoder.decode) if lazy else decoder.decode(raw))
    return state


def core(data: bytes | memoryview) -> msgspec.Raw:
    """The core of :func:`encode`'s bytes: the state with its big containers emptied, still encoded."""
    return msgspec.msgpack.decode(data, type=Split).core


_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def _decoder(kind: Any) -> msgspec.msgpack.Decoder[Any]:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.msgpack.Decoder(kind)
    return decoder


def _resolve(state: Any, state_type: Any, path: list[Step], container: type) -> tuple[Any, Step, Any]:
    """The parent of the container at ``path``, its last step and the type of its values; ValueError if none."""
    node, kind = state, state_type
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(step, str):
            hints = _hints(kind)
            if step not in hints or not isinstance(node, msgspec.Struct):
                raise ValueError(f"the state has no field {step!r}")
            kind = hints[step]
            if last:
                return node, step, _value_type(kind, container)
            node = getattr(node, step)
        else:
            if not isinstance(node, dict) or typing.get_origin(kind) is not dict:
                raise ValueError(f"the state has no map at {path[:i]}")
            kind = typing.get_args(kind)[1]
            if last:
                if step[1] not in node:
                    raise ValueError(f"the state has no key {step[1]!r}")
                return node, step, _value_type(kind, container)
            node = node[step[1]]
    raise ValueError("an empty path")


def _value_type(kind: Any, container: type) -> Any:
    if typing.get_origin(kind) is not container:
        raise ValueError(f"{kind} is no {container.__name__}")
    return typing.get_args(kind)[-1]


def _hints(kind: Any) -> dict[str, Any]:
    origin = typing.get_origin(kind) or kind
    hints = typing.get_type_hints(origin, include_extras=True)
    params = getattr(origin, "__parameters__", ())
    args = typing.get_args(kind)
    if params and args:  # ReplayState[S]: the folder's state type in place of S
        bound = dict(zip(params, args, strict=False))
        hints = {k: bound.get(v, v) for k, v in hints.items()}
    return hints
