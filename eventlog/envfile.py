"""``KEY=VALUE`` files as systemd's ``EnvironmentFile=`` reads them, read as data: nothing in them is ever run.

:func:`parse_env` takes the part of the syntax that means the same to systemd
and to a person reading the file, and names every other line
``FILE:LINE: reason`` rather than guess:

- a space is what systemd takes for one: a space or a tab (its ``WHITESPACE``;
  a carriage return ends a line for it);
- blank lines, and comments (``#`` or ``;`` first on the line) are skipped;
- ``KEY=VALUE``, spaces around ``=`` allowed, a key of letters, digits and ``_``
  (not a digit first); a key given twice is refused (systemd would take the
  last, silently);
- a value is bare (spaces around it dropped), or wholly in single quotes (as
  written), or wholly in double quotes (``\\"``, ``\\\\``, ``\\$`` and
  ``\\``` stand for the character, any other backslash stays);
- refused: a line that is no ``KEY=VALUE`` (systemd skips it: a typo would
  set nothing), a quote not closed on its line or text after it, a quote or a
  backslash in a bare value (systemd drops a bare backslash: ``\\S`` would
  become ``S``), a line ending in a backslash (systemd joins it to the next),
  and bytes that are not UTF-8;
- refused too, each named, as lines a person reads one way and systemd
  another: a ``#`` after a space in a value or after its closing quote (no
  comment there to systemd: it is part of the value), ``export`` before the
  key (systemd reads no ``export``: the key would be ``export KEY``), a UTF-8
  byte order mark (systemd reads it as part of the first key), a carriage
  return inside a line (a line break to systemd), and a space systemd does
  not trim (U+00A0, U+3000, ...) where one would be trimmed: around the key
  or the value.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from typing import NamedTuple

#: What systemd takes for a space within a line (its ``WHITESPACE`` less the line ends).
_SPACES = " \t"
#: ``KEY = rest``: the key, then the value's text.
_ASSIGNMENT = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*(.*?)[ \t]*")
#: ``export KEY=...``: a shell line.
_EXPORT = re.compile(r"export[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*=")
#: A ``#`` a person reads as a comment: after a space.
_COMMENT = re.compile(r"\s#")
#: Why systemd reads a comment after a value as part of it.
_NO_COMMENT = ("a # after a space, which systemd keeps as part of the value (it reads no comment after a value): "
               "put the comment on a line of its own")
#: What a backslash stands for inside double quotes (systemd's and the shell's).
_ESCAPED = '"\\$`'


class EnvValue(NamedTuple):
    """A value, its quotes taken off, and the line (1-based) it was set on."""

    value: str
    line: int


def parse_env(data: bytes, name: str, keys: Collection[str] | None = None) -> tuple[dict[str, EnvValue], list[str]]:
    """The assignments of an env file's bytes (``name``: the file, for the problems), and each line refused
    (``NAME:LINE: reason``, in line order); the lines that can be read are read even when others cannot.
    ``keys``: the only keys a line may set (None: any)."""
    values: dict[str, EnvValue] = {}
    problems: list[str] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.removesuffix(b"\r").decode("utf-8")
        except UnicodeDecodeError as err:
            problems.append(f"{name}:{number}: not UTF-8 (byte {err.start + 1} of the line)")
            continue
        try:
            found = _line(line)
        except ValueError as err:
            problems.append(f"{name}:{number}: {err}")
            continue
        if found is None:
            continue
        key, value = found
        if keys is not None and key not in keys:
            problems.append(f"{name}:{number}: {key} is not one of {', '.join(keys)}")
            continue
        if key in values:
            problems.append(f"{name}:{number}: {key} is set again (first on line {values[key].line}); "
                            "systemd would take the last one: keep one")
            continue
        values[key] = EnvValue(value, number)
    return values, problems


def _line(line: str) -> tuple[str, str] | None:
    """One line's key and value (None: blank or a comment); ValueError saying why it cannot be read."""
    text = line.strip(_SPACES)
    if not text:
        return None
    if text.endswith("\\"):
        raise ValueError("ends in a backslash, which systemd joins to the next line: write it on one line")
    if "\r" in text:  # a comment's too: what follows it would be a line to systemd
        raise ValueError("a carriage return inside the line, which systemd reads as a line break: remove it")
    if text[0] in "#;":
        return None
    if text[0] == "\ufeff":
        raise ValueError("starts with a byte order mark (UTF-8 EF BB BF), which systemd reads as part of the first "
                         "key: save the file without it")
    match = _ASSIGNMENT.fullmatch(line)
    if match is None:
        raise ValueError(_not_assignment(text))
    key, rest = match[1], match[2]
    return key, _value(rest)


def _not_assignment(text: str) -> str:
    """Why ``text`` (a line, its spaces taken off) is no ``KEY=VALUE``, as a person would fix it."""
    if _EXPORT.match(text):
        return ("not KEY=VALUE: export before the key, which systemd does not read (it would skip a key "
                "'export NAME'): write NAME=VALUE")
    if "=" not in text:
        return "not KEY=VALUE (systemd skips such a line, so it would set nothing)"
    odd = _odd_space(text.partition("=")[0])
    if odd is not None:
        return f"not KEY=VALUE: {odd} in the key, which systemd takes for no space: remove it"
    return "not KEY=VALUE: a key is letters, digits and _, not a digit first"


def _odd_space(text: str) -> str | None:
    """The first space in ``text`` systemd takes for none (U+00A0, U+3000, ...), named, or None."""
    for char in text:
        if char.isspace() and char not in _SPACES:
            return f"U+{ord(char):04X} ({unicodedata.name(char, 'a space')})"
    return None


def _value(rest: str) -> str:
    """A value as written after ``=`` (spaces around it already dropped), its quotes taken off."""
    if not rest:
        return ""
    quote = rest[0]
    if quote == "'":
        end = rest.find("'", 1)
        if end < 0:
            raise ValueError("a single quote not closed on its line")
        return _whole(rest, end, rest[1:end])
    if quote == '"':
        out: list[str] = []
        i = 1
        while i < len(rest):
            char = rest[i]
            if char == '"':
                return _whole(rest, i, "".join(out))
            if char == "\\" and i + 1 < len(rest):
                following = rest[i + 1]
                out.append(following if following in _ESCAPED else char + following)
                i += 2
                continue
            out.append(char)
            i += 1
        raise ValueError("a double quote not closed on its line")
    for edge, where in ((rest[0], "starts"), (rest[-1], "ends")):
        odd = _odd_space(edge)
        if odd is not None:
            raise ValueError(f"the value {where} with {odd}, which systemd keeps (it trims only spaces and tabs): "
                             "remove it, or put the whole value in single quotes")
    if _COMMENT.search(rest):
        raise ValueError(_NO_COMMENT)
    if "'" in rest or '"' in rest:
        raise ValueError("a quote inside a bare value: put the whole value in single quotes")
    if "\\" in rest:
        raise ValueError("a backslash in a bare value, which systemd drops (\\S would become S): put the whole "
                         "value in single quotes")
    return rest


def _whole(rest: str, end: int, value: str) -> str:
    """``value``, when its closing quote at ``end`` ends the text; ValueError when more follows it."""
    after = rest[end + 1:].strip(_SPACES)
    if after.startswith("#"):
        raise ValueError(_NO_COMMENT)
    if after:
        raise ValueError("text after the closing quote: put the whole value in one pair of quotes")
    return value


__all__ = ["EnvValue", "parse_env"]
