"""Small helpers shared by the command-line tools (Kafka's ``CommandLineUtils``)."""
from __future__ import annotations

import sys

from pykbroker.config.properties import load_properties


def parse_key_values(items: list[str] | None, what: str = "property") -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; exits with Kafka's message on a bad item."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(",") if what == "config-list" else [item]:
            if "=" not in part:
                print(f"Invalid command line properties: {part}", file=sys.stderr)
                raise SystemExit(1)
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def client_properties(config_file: str | None, overrides: dict[str, str], bootstrap: str | None) -> dict[str, str]:
    props: dict[str, str] = dict(load_properties(config_file)) if config_file else {}
    props.update(overrides)
    if bootstrap:
        props["bootstrap.servers"] = bootstrap
    return props
