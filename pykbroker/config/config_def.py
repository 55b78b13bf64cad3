"""ConfigDef: each configuration key declared once with type, default, validator, importance and doc.

Mirrors ``org.apache.kafka.common.config.ConfigDef``. ``ConfigDef.parse(props)`` turns string
properties into typed values; a bad value raises :class:`ConfigException` whose message names the key
and the value (start-up prints it as one line and exits). The one mechanism for configuration keys:
the broker's (:mod:`pykbroker.config.kafka_config_def`) and the topics' (:mod:`pykbroker.log.log_config`,
whose keys also list their broker synonyms).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ConfigException(ValueError):
    """Invalid configuration: ``Invalid value <v> for configuration <key>: <reason>``."""

    def __init__(self, key: str, value: Any = None, reason: str | None = None):
        self.key, self.value, self.reason = key, value, reason
        if reason is None:
            msg = key
        else:
            msg = f"Invalid value {value} for configuration {key}: {reason}"
        super().__init__(msg)


class Type:
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


_INT_BOUNDS = {Type.INT: (-(2**31), 2**31 - 1), Type.SHORT: (-(2**15), 2**15 - 1), Type.LONG: (-(2**63), 2**63 - 1)}

NO_DEFAULT = object()


def parse_type(key: str, value: Any, type_: str) -> Any:
    """Convert ``value`` (a string from a properties file, or an already typed value) to ``type_``."""
    if value is None:
        return None
    try:
        if type_ == Type.BOOLEAN:
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("true", "false"):
                return s == "true"
            raise ConfigException(key, value, "Expected value to be either true or false")
        if type_ in (Type.STRING, Type.CLASS, Type.PASSWORD):
            return str(value).strip() if type_ != Type.PASSWORD else str(value)
        if type_ in _INT_BOUNDS:
            if isinstance(value, bool):
                raise ValueError
            n = int(str(value).strip()) if not isinstance(value, int) else value
            lo, hi = _INT_BOUNDS[type_]
            if not lo <= n <= hi:
                raise ConfigException(key, value, f"Not a number of type {type_.upper()}")
            return n
        if type_ == Type.DOUBLE:
            return float(str(value).strip())
        if type_ == Type.LIST:
            if isinstance(value, (list, tuple)):
                return [str(v).strip() for v in value]
            s = str(value).strip()
            return [item.strip() for item in s.split(",")] if s else []
    except ConfigException:
        raise
    except (TypeError, ValueError):
        raise ConfigException(key, value, f"Not a number of type {type_.upper()}") from None
    raise ConfigException(key, value, f"Unknown type {type_}")


# -- validators: each takes (key, value) and raises ConfigException ----------------------------
def at_least(minimum: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigException(key, value, f"Value must be at least {minimum}")

    check.__doc__ = f"[{minimum},...]"
    return check


def between(lo: float, hi: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and not lo <= value <= hi:
            raise ConfigException(key, value, f"Value must be no less than {lo} and no more than {hi}")

    check.__doc__ = f"[{lo},...,{hi}]"
    return check


def in_values(*allowed: str, case_sensitive: bool = True) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        norm = (lambda s: s) if case_sensitive else (lambda s: s.lower())
        ok = {norm(a) for a in allowed}
        for v in items:
            if norm(v) not in ok:
                shown = ",".join(items) if isinstance(value, list) else value
                raise ConfigException(key, shown, f"String must be one of: {', '.join(allowed)}")

    check.__doc__ = f"[{', '.join(allowed)}]"
    return check


@dataclass(frozen=True)
class ConfigSynonym:
    """Another key that supplies this key's default, times ``multiplier`` (``log.roll.hours`` -> ms), as
    Kafka's ``ConfigSynonym`` (topic keys take their defaults from broker keys)."""

    name: str
    multiplier: int = 1


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any
    validator: Callable[[str, Any], None] | None
    importance: str
    doc: str
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


class ConfigDef:
    """An ordered table of :class:`ConfigKey` (``define`` chains)."""

    def __init__(self) -> None:
        self.keys: dict[str, ConfigKey] = {}

    def define(
        self,
        name: str,
        type_: str,
        default: Any = NO_DEFAULT,
        validator: Callable[[str, Any], None] | None = None,
        importance: str = "medium",
        doc: str = "",
        synonyms: tuple[ConfigSynonym, ...] = (),
    ) -> ConfigDef:
        if name in self.keys:
            raise ValueError(f"Configuration {name} is defined twice.")
        if default is not NO_DEFAULT and default is not None:
            default = parse_type(name, default, type_)
        self.keys[name] = ConfigKey(name, type_, default, validator, importance, doc, tuple(synonyms))
        return self

    @classmethod
    def merge(cls, *config_defs: ConfigDef) -> ConfigDef:
        """One ConfigDef with the keys of ``config_defs``, in their order (Kafka's ``Utils.mergeConfigs``);
        ValueError if two of them define the same key."""
        merged = cls()
        for config_def in config_defs:
            for name, key in config_def.keys.items():
                if name in merged.keys:
                    raise ValueError(f"Configuration {name} is defined twice.")
                merged.keys[name] = key
        return merged

    def parse_value(self, name: str, value: Any) -> Any:
        """One key's typed, validated value (Kafka's ``parseValue``); ConfigException if it is bad.
        KeyError for an undefined ``name``."""
        key = self.keys[name]
        parsed = parse_type(name, value, key.type)
        if key.validator is not None:
            key.validator(name, parsed)
        return parsed

    def parse(self, props: dict[str, Any]) -> dict[str, Any]:
        """Typed values for every defined key (defaults filled in). Raises ConfigException for a bad
        value, or for a missing key without default (``Missing required configuration "<key>" which has
        no default value.``)."""
        values: dict[str, Any] = {}
        for name, key in self.keys.items():
            if name in props:
                value = parse_type(name, props[name], key.type)
            elif key.has_default:
                value = key.default
            else:
                raise ConfigException(f'Missing required configuration "{name}" which has no default value.')
            if key.validator is not None:
                key.validator(name, value)
            values[name] = value
        return values

    def unknown(self, props: dict[str, Any]) -> list[str]:
        return sorted(k for k in props if k not in self.keys)
