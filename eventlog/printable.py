r"""Text from a log, made safe to show a person: one rule for the CLI and the console.

A log's ids and texts may hold characters that forge or hide what a person
reads: a line break starts a line of its own, an ANSI escape drives the
terminal, a bidi control reorders what follows (``r\u202eevil`` reads
``rlive``), a C1 control shows nothing. :data:`CONTROL` names them all: C0,
DEL, C1, the line and paragraph separators, and every bidi control (Unicode's
Bidi_Control: the marks ALM, LRM and RLM, the embeddings, overrides and
isolates). Each is written as an escape (``\n``, ``\x1b``, ``\u202e``); a
backslash is left as is.

The CLI's human-readable lines go through :func:`escape`; the console gets the
same rule from :func:`script` (``/console/escape.js``): the pattern as written
here and the escape of every character it matches, made by :func:`escape`.
"""

from __future__ import annotations

import functools
import json
import re

#: What is escaped, as a regular expression that Python and JavaScript read alike.
CONTROL = r"[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"
_CONTROL = re.compile(CONTROL)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(text: str) -> str:
    """``text`` with every character of :data:`CONTROL` written as an escape (``\\n``, ``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(lambda m: _NAMED.get(m[0]) or _code(m[0]), text)


def _code(char: str) -> str:
    n = ord(char)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


@functools.cache
def script() -> str:
    """The rule for the console: ``ESCAPED`` (:data:`CONTROL`) and ``ESCAPES`` (each character's escape)."""
    table = {c: escape(c) for c in map(chr, range(0x10000)) if _CONTROL.fullmatch(c)}
    return ("// The CLI's escaping rule (eventlog/printable.py), written by the server: do not edit.\n"
            f"const ESCAPED = new RegExp({json.dumps(CONTROL)}, \"g\");\n"
            f"const ESCAPES = {json.dumps(table)};\n")


__all__ = ["CONTROL", "escape", "script"]
