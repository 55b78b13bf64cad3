"""kafka-configs: describe and alter topic, broker and group configs (Kafka's ``kafka.admin.ConfigCommand``).

    bin/kafka-configs --bootstrap-server HOST:PORT --describe --entity-type topics|brokers|groups
        [--entity-name N | --entity-default] [--all]
    bin/kafka-configs --bootstrap-server HOST:PORT --alter --entity-type topics|brokers|groups
        (--entity-name N | --entity-default) [--add-config k=v,k2=v2] [--delete-config k,k2]

``--topic T``, ``--broker N``, ``--broker-defaults`` and ``--group G`` are Kafka's shorthands. Output as Kafka
prints it: ``Dynamic configs for topic T are:`` (``All configs ...`` with ``--all``; ``Default configs for brokers
in the cluster are:`` for the broker default) then per config, sorted by name,
``  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, ...}``; after an alter
``Completed updating config for topic T.``. Without an entity name, ``--describe`` covers every topic (Metadata),
every group (ListGroups) or the bootstrap broker plus the broker default.
Errors: one line on stderr, exit status 1. Users, clients, IPs and broker loggers are not supported by the broker
(no SCRAM credentials or quotas yet): such an entity type is refused with a one-line message.
Requests: DescribeConfigs v4, IncrementalAlterConfigs v1, Metadata v12, ListGroups v4.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging

# org.apache.kafka.common.config.ConfigResource.Type
RESOURCE_TYPES = {"topics": 2, "brokers": 4, "groups": 32}
# org.apache.kafka.clients.admin.ConfigEntry.ConfigSource, by DescribeConfigs config_source id
CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
UNSUPPORTED_TYPES = ("clients", "ips", "broker-loggers", "client-metrics")
SCRAM_MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)")
SET, DELETE = 0, 1  # AlterConfigOp.OpType ids
BROKER_DEFAULT = ""


class ConfigCommandError(Exception):
    pass


def _source_name(source: int) -> str:
    return CONFIG_SOURCES.get(source, "UNKNOWN")


def _dynamic_source(entity_type: str, name: str) -> int:
    if entity_type == "topics":
        return 1
    if entity_type == "groups":
        return 8
    return 3 if name == BROKER_DEFAULT else 2


def _check_name(entity_type: str, name: str) -> None:
    if entity_type == "brokers" and name != BROKER_DEFAULT:
        try:
            int(name)
        except ValueError:
            raise ConfigCommandError(
                f"The entity name for {entity_type} must be a valid integer broker id, found: {name}"
            ) from None


def resource_configs(conn: BrokerConnection, entity_type: str, name: str, describe_all: bool) -> list[dict]:
    """The configs of one resource, sorted by name: only the dynamic ones of that resource unless ``describe_all``
    (Kafka's ConfigCommand.getResourceConfig)."""
    _check_name(entity_type, name)
    response = conn.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": RESOURCE_TYPES[entity_type], "resource_name": name, "configuration_keys": None}
            ],
            "include_synonyms": True,
            "include_documentation": False,
        },
    )
    (result,) = response["results"]
    if result["error_code"] != errors.NONE:
        raise errors.for_code(result["error_code"])(
            result.get("error_message") or errors.for_code(result["error_code"]).default_message
        )
    wanted = _dynamic_source(entity_type, name)
    entries = [c for c in result["configs"] if describe_all or c["config_source"] == wanted]
    return sorted(entries, key=lambda c: c["name"])


def _entities(conn: BrokerConnection, entity_type: str, name: str | None) -> list[str]:
    if name is not None:
        return [name]
    if entity_type == "topics":
        metadata = conn.request(
            ApiKeys.METADATA,
            12,
            {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
        return sorted(t["name"] for t in metadata["topics"] if t["error_code"] == errors.NONE)
    if entity_type == "groups":
        groups = conn.request(ApiKeys.LIST_GROUPS, 4, {"states_filter": []})
        return sorted(g["group_id"] for g in groups["groups"])
    metadata = conn.request(
        ApiKeys.METADATA,
        12,
        {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
    )
    return [str(b["node_id"]) for b in sorted(metadata["brokers"], key=lambda b: b["node_id"])] + [BROKER_DEFAULT]


def _value(v: str | None) -> str:
    return "null" if v is None else v


def describe_users(conn: BrokerConnection, args, out) -> None:
    """Kafka's describeClientQuotaAndUserScramCredentialConfigs (SCRAM part; quotas are not supported)."""
    users = None if args.entity_name is None else [{"name": args.entity_name}]
    r = conn.request(ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": users})
    if r["error_code"] != errors.NONE:
        raise errors.for_code(r["error_code"])(r.get("error_message") or "")
    names = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
    for result in r["results"]:
        user = result["user"]
        if result["error_code"] != errors.NONE:
            exc = errors.for_code(result["error_code"])
            name = exc.__name__.replace("Error", "Exception")
            print(
                f"Error retrieving SCRAM credential configs for user-principal '{user}': {name}: "
                f"{result['error_message'] or exc.default_message}",
                file=out,
            )
            continue
        text = ", ".join(
            f"{names.get(c['mechanism'], c['mechanism'])}=iterations={c['iterations']}"
            for c in result["credential_infos"]
        )
        print(f"SCRAM credential configs for user-principal '{user}' are {text}", file=out)


def alter_users(conn: BrokerConnection, args, out) -> None:
    """SCRAM credentials of a user (Kafka's alterUserScramCredentialConfigs): ``--add-config
    'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` (salted here with PBKDF2, as Kafka's admin
    client does), ``--delete-config SCRAM-SHA-512``."""
    if args.entity_name is None:
        raise ConfigCommandError("--entity-name or --entity-default must be specified with --alter")
    add = _parse_add(args.add_config or [])
    delete = _parse_delete(args.delete_config or [])
    if not add and not delete:
        raise ConfigCommandError("At least one of --add-config or --delete-config must be specified with --alter")
    for keys, verb in ((list(add), "added"), (delete, "deleted")):
        unknown = [k for k in keys if k not in SCRAM_MECHANISM_TYPES]
        if unknown:
            raise ConfigCommandError(
                f"Only quota and SCRAM credential configs can be {verb} for 'users' using --bootstrap-server. "
                f"Unexpected config names: {','.join(unknown)}"
            )
    upsertions = []
    for mechanism, value in add.items():
        m = _SCRAM_VALUE.fullmatch(value)
        if m is None:
            raise ConfigCommandError(
                f"Invalid credential property {mechanism}={value}: expected [iterations=N,]password=P"
            )
        iterations = int(m.group(1)) if m.group(1) not in (None, "", "-1") else 4096
        salt = os.urandom(32)
        hash_name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        salted = hashlib.pbkdf2_hmac(hash_name, m.group(2).encode(), salt, max(iterations, 1))
        upsertions.append(
            {
                "name": args.entity_name,
                "mechanism": SCRAM_MECHANISM_TYPES[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted,
            }
        )
    deletions = [{"name": args.entity_name, "mechanism": SCRAM_MECHANISM_TYPES[m]} for m in delete]
    # One request per mechanism: the KRaft controller refuses a user twice in one request (DUPLICATE_RESOURCE),
    # while this command may name both mechanisms.
    requests = [{"deletions": [d], "upsertions": []} for d in deletions]
    requests += [{"deletions": [], "upsertions": [u]} for u in upsertions]
    for body in requests:
        r = conn.request(ApiKeys.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
        for result in r["results"]:
            if result["error_code"] != errors.NONE:
                raise errors.for_code(result["error_code"])(
                    result.get("error_message") or errors.for_code(result["error_code"]).default_message
                )
    print(f"Completed updating config for user {args.entity_name}.", file=out)


def describe(conn: BrokerConnection, args, out) -> None:
    for entity in _entities(conn, args.entity_type, args.entity_name):
        if args.entity_type == "brokers" and entity == BROKER_DEFAULT:
            print(f"Default configs for {args.entity_type} in the cluster are:", file=out)
        else:
            kind = "All" if args.all else "Dynamic"
            print(f"{kind} configs for {args.entity_type[:-1]} {entity} are:", file=out)
        for c in resource_configs(conn, args.entity_type, entity, args.all):
            synonyms = ", ".join(f"{_source_name(s['source'])}:{s['name']}={_value(s['value'])}" for s in c["synonyms"])
            sensitive = str(c["is_sensitive"]).lower()
            print(f"  {c['name']}={_value(c['value'])} sensitive={sensitive} synonyms={{{synonyms}}}", file=out)


def _parse_add(items: list[str]) -> dict[str, str]:
    """``k=v,k2=[a,b]`` -> dict (Kafka's parseConfigsToBeAdded: square brackets group a list value)."""
    out: dict[str, str] = {}
    for item in items:
        depth, start = 0, 0
        parts = []
        for i, ch in enumerate(item):
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(item[start:i])
                start = i + 1
        parts.append(item[start:])
        for part in parts:
            if not part.strip():
                continue
            if "=" not in part:
                raise ConfigCommandError(
                    "requirement failed: Invalid entity config: all configs to be added must be in the format "
                    '"key=val".'
                )
            k, v = part.split("=", 1)
            v = v.strip()
            if v.startswith("[") and v.endswith("]"):
                v = v[1:-1]
            out[k.strip()] = v
    return out


def _parse_delete(items: list[str]) -> list[str]:
    return [k.strip() for item in items for k in item.split(",") if k.strip()]


def alter(conn: BrokerConnection, args, out) -> None:
    if args.entity_name is None:
        raise ConfigCommandError("--entity-name or --entity-default must be specified with --alter")
    add = _parse_add(args.add_config or [])
    delete = _parse_delete(args.delete_config or [])
    if not add and not delete:
        raise ConfigCommandError("At least one of --add-config or --delete-config must be specified with --alter")
    both = sorted(set(add) & set(delete))
    if both:
        raise ConfigCommandError(f"Cannot add and delete the same config(s) in one command: {','.join(both)}")
    name = args.entity_name
    current = {c["name"] for c in resource_configs(conn, args.entity_type, name, describe_all=False)}
    invalid = [k for k in delete if k not in current]
    if invalid:
        raise ConfigCommandError(f"Invalid config(s): {','.join(invalid)} specified for {args.entity_type} {name}")
    ops = [{"name": k, "config_operation": SET, "value": v} for k, v in add.items()]
    ops += [{"name": k, "config_operation": DELETE, "value": None} for k in delete]
    response = conn.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [{"resource_type": RESOURCE_TYPES[args.entity_type], "resource_name": name, "configs": ops}],
            "validate_only": False,
        },
    )
    for r in response["responses"]:
        if r["error_code"] != errors.NONE:
            raise errors.for_code(r["error_code"])(
                r.get("error_message") or errors.for_code(r["error_code"]).default_message
            )
    if name == BROKER_DEFAULT:
        print(f"Completed updating default config for {args.entity_type} in the cluster.", file=out)
    else:
        print(f"Completed updating config for {args.entity_type[:-1]} {name}.", file=out)


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-configs", description="Add/Remove entity config for a topic, client, user, broker or group."
    )
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    action.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--entity-type", action="append", help="Type of entity (topics/brokers/groups)")
    p.add_argument("--entity-name", action="append", help="Name of entity (topic name/broker id/group id)")
    p.add_argument("--entity-default", action="store_true", help="Default entity name for brokers")
    p.add_argument("--topic", help="The topic's name.")
    p.add_argument("--broker", help="The broker's ID.")
    p.add_argument("--broker-defaults", action="store_true", help="The config defaults for all brokers.")
    p.add_argument("--group", help="The group's ID.")
    for shorthand in ("user", "client", "ip", "broker-logger", "client-metrics"):
        p.add_argument(f"--{shorthand}", help=argparse.SUPPRESS)
    p.add_argument("--add-config", action="append", help="Key Value pairs of configs to add: k1=v1,k2=[v1,v2,v2]")
    p.add_argument("--delete-config", action="append", help="config keys to remove: k1,k2")
    p.add_argument("--all", action="store_true", help="List all configs for the given entity, incl. static ones.")
    return p


def _resolve_entity(args) -> None:
    """Fold ``--topic``/``--broker``/``--group``/``--broker-defaults`` into ``entity_type``/``entity_name``."""
    types = list(args.entity_type or [])
    names = list(args.entity_name or [])
    for flag, etype in (("topic", "topics"), ("broker", "brokers"), ("group", "groups")):
        if getattr(args, flag) is not None:
            types.append(etype)
            names.append(getattr(args, flag))
    for flag, etype in (
        ("user", "users"),
        ("client", "clients"),
        ("ip", "ips"),
        ("broker_logger", "broker-loggers"),
        ("client_metrics", "client-metrics"),
    ):
        if getattr(args, flag) is not None:
            types.append(etype)
            if flag == "user":
                names.append(args.user)
    if args.broker_defaults:
        types.append("brokers")
        args.entity_default = True
    if not types:
        raise ConfigCommandError("At least one entity type must be specified")
    if len(set(types)) > 1 or len(names) > 1:
        raise ConfigCommandError("Only one entity type and name may be specified with --bootstrap-server")
    etype = types[0]
    if etype in UNSUPPORTED_TYPES:
        raise ConfigCommandError(
            f"Entity type {etype} is not supported by this broker (supported: topics, brokers, groups)"
        )
    if etype not in RESOURCE_TYPES and etype != "users":
        raise ConfigCommandError(f"Invalid entity type {etype}, the entity type must be one of topics, brokers, groups")
    if args.entity_default:
        if etype != "brokers":
            raise ConfigCommandError(f"--entity-default is not supported for entity type {etype}")
        if names:
            raise ConfigCommandError("--entity-name and --entity-default cannot both be specified")
        names = [BROKER_DEFAULT]
    if args.all and not args.describe:
        raise ConfigCommandError("--all is only supported with --describe")
    if args.describe and (args.add_config or args.delete_config):
        raise ConfigCommandError("--add-config and --delete-config are only supported with --alter")
    args.entity_type = etype
    args.entity_name = names[0] if names else None


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    try:
        _resolve_entity(args)
    except ConfigCommandError as e:
        print(e, file=sys.stderr)
        return 1
    try:
        with BrokerConnection.to(args.bootstrap_server, client_id="kafka-configs") as conn:
            if args.entity_type == "users":
                (describe_users if args.describe else alter_users)(conn, args, out)
            else:
                (describe if args.describe else alter)(conn, args, out)
    except ConfigCommandError as e:
        print(e, file=sys.stderr)
        return 1
    except (errors.KafkaError, OSError, ValueError) as e:
        print(f"Error while executing config command : {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
