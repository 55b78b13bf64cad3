"""Kafka's JAAS configuration lines (``sasl.jaas.config``), e.g.::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

Mirrors ``org.apache.kafka.common.security.JaasConfig``'s parser for one login module: the module class, its
control flag (required, requisite, sufficient, optional), then ``key=value`` options (values quoted with
double quotes may hold spaces and ``\\"``), ended by ``;``. Raises ValueError with Kafka's wording on a
malformed line. Pure functions.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')
FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasEntry(NamedTuple):
    login_module: str
    flag: str
    options: dict[str, str]


def parse_jaas_config(text: str) -> JaasEntry:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"Value not specified for key in JAAS config: {text[pos : pos + 20]!r}")
        quoted, word, eq, _semi = m.groups()
        if quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        elif eq is not None:
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("JAAS config entry not terminated by semi-colon")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in FLAGS:
        raise ValueError(f"Invalid control flag {tokens[1][1]} in JAAS config")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" or tokens[i + 2][0] == ";":
            raise ValueError("Value not specified for key in JAAS config")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens) or tokens[i][0] != ";":
        raise ValueError("JAAS config entry not terminated by semi-colon")
    if i + 1 != len(tokens):
        raise ValueError("JAAS config property contains 2 login modules, it should contain 1 module")
    return JaasEntry(module, flag, options)
