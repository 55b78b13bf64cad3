"""Java ``.properties`` parsing, as ``java.util.Properties.load`` reads ``server.properties``.

Supports ``#``/``!`` comments, ``=``, ``:`` or whitespace separators, backslash escapes
(``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` -> ``<any>``) and line continuations (a line ending in an odd
number of backslashes continues on the next line, whose leading whitespace is dropped).
Later keys win, as in Java. Returns ``dict[str, str]``.
"""

from __future__ import annotations

from collections.abc import Iterator

_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A malformed properties file (e.g. a bad ``\\u`` escape); the message names the line."""


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first physical line number, logical line) after joining continuations."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i + 1
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line):
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(_WS)
            i += 1
        yield start, line


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str, lineno: int) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or any(h not in "0123456789abcdefABCDEF" for h in hexdigits):
                raise PropertiesError(f"line {lineno}: malformed \\uxxxx encoding")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WS)
    if rest and rest[0] in "=:" and (i >= n or line[i] in _WS or line[i] in "=:"):
        rest = rest[1:].lstrip(_WS)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text into ``{key: value}`` (strings, escapes resolved)."""
    result: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        key, value = _split(line)
        result[_unescape(key, lineno)] = _unescape(value, lineno)
    return result


def load_properties(path: str) -> dict[str, str]:
    """Read and parse a properties file (ISO-8859-1 like Java, falling back to UTF-8 content)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_properties(text)
