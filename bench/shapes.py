"""The same log written the other ways spec section 2 allows, to measure replay on a log we did not write.

The generator writes lines as the appender does: compact, ``seq`` on every line, no ``v``,
optional fields only when they hold something. A log written by other code may differ
and still mean the same (the same dump, but for ``log``):

- ``v1``: ``"v":1`` on every line (the version, written although it is the default);
- ``no-seq``: no ``seq`` at all (hand-written: the line number stands in);
- ``dumps``: every line as Python's ``json.dumps`` writes a dict of every field: ``", "``
  and ``": "``, ``"v": 1``, and every optional field written, with its default or null;
- ``extra``: two fields the contract does not know on every line (``"host"``, ``"pid"``),
  as a writer may add (spec section 1: kept on read, ignored by projections).

``python -m bench.shapes SHAPE LOG OUT`` writes LOG in that shape to OUT; then
``tools/bench --only replay --log OUT`` measures it against its own floor (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import msgspec

from eventlog.reader import _decoder

_SEQ = re.compile(rb',"seq":\d+')


def _v1(line: bytes) -> bytes:
    return b'{"v":1,' + line[1:]


def _no_seq(line: bytes) -> bytes:
    return _SEQ.sub(b"", line, count=1)


def _dumps(line: bytes) -> bytes:
    fields = msgspec.to_builtins(_decoder.decode(line))
    fields.pop("batch_end", None)  # the appender's own marker, not part of what an event says
    return json.dumps({"type": fields.pop("type"), **fields}).encode()


def _extra(line: bytes) -> bytes:
    return line[:-1] + b',"host":"runner-1","pid":4242}'


#: Shape name -> how one compact line (without its newline) is written in it.
SHAPES: dict[str, Callable[[bytes], bytes]] = {"v1": _v1, "no-seq": _no_seq, "dumps": _dumps, "extra": _extra}


def reshape(lines: Iterable[bytes], shape: str) -> Iterator[bytes]:
    """Each line (with or without its newline) in ``shape``, newline-terminated."""
    write = SHAPES[shape]
    for line in lines:
        yield write(line.rstrip(b"\n")) + b"\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write LOG in SHAPE to OUT; exit 2 on bad usage or an unreadable LOG."""
    parser = argparse.ArgumentParser(prog="python -m bench.shapes", description=__doc__.split("\n\n")[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("log", type=Path, help="a log the generator wrote (compact lines)")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    try:
        with args.log.open("rb") as f, args.out.open("wb") as out:
            out.writelines(reshape(f, args.shape))
    except (OSError, msgspec.DecodeError) as err:
        print(f"bench.shapes: {args.log}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
