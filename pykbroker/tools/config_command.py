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
Client quotas (KIP-546, :mod:`pykbroker.tools.config_command_quotas`): ``--entity-type users|clients|ips``
with ``--entity-name N`` or ``--entity-default`` (``--user``, ``--client``, ``--ip``, ``--user-defaults``,
``--client-defaults``, ``--ip-defaults`` are the shorthands), and ``users`` + ``clients`` together for a
(user, client-id) entity: ``--entity-type users --entity-name U --entity-type clients --entity-default``; names
pair with types in command-line order. ``users`` also carries SCRAM credentials (``SCRAM-SHA-256=[...]``).
Errors: one line on stderr, exit status 1. Broker loggers and client metrics are not supported by the broker:
such an entity type is refused with a one-line message.
Requests: DescribeConfigs v4, IncrementalAlterConfigs v1, Metadata v12, ListGroups v4, DescribeClientQuotas v1,
AlterClientQuotas v1, DescribeUserScramCredentials v0, AlterUserScramCredentials v0.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.metadata.client_quota_control_manager import valid_ip_entity
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging
from pykbroker.tools.config_command_quotas import (
    IP_KEYS,
    QUOTA_ENTITY_TYPES,
    USER_CLIENT_KEYS,
    QuotaCommandError,
    alter_quotas,
    describe_quotas,
)

# --entity-type -> org.apache.kafka.common.config.ConfigResource.Type
RESOURCE_TYPES = {
    "topics": ConfigResourceType.TOPIC,
    "brokers": ConfigResourceType.BROKER,
    "groups": ConfigResourceType.GROUP,
}
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
UNSUPPORTED_TYPES = ("broker-loggers", "client-metrics")
SCRAM_MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)")
SET, DELETE = 0, 1  # AlterConfigOp.OpType ids
BROKER_DEFAULT = ""


class ConfigCommandError(QuotaCommandError):
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


def describe_client_entities(conn: BrokerConnection, args, out) -> None:
    """Kafka's describeClientQuotaAndUserScramCredentialConfigs: the quotas of the matching entities, then (for
    users alone, no default) the users' SCRAM credentials; ``ips`` only quotas."""
    describe_quotas(conn, args.quota_entities, out)
    types = [t for t, _ in args.quota_entities]
    if types != ["user"] or args.quota_entities[0][1] == "":
        return
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


def alter_client_entities(conn: BrokerConnection, args, out) -> None:
    """Kafka's alterConfig for users, clients and ips: quota keys go to AlterClientQuotas; SCRAM mechanisms of
    a single named user to AlterUserScramCredentials (not both at once, never for the default user)."""
    if any(name is None for _, name in args.quota_entities):
        raise ConfigCommandError(
            "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
        )
    add = _parse_add(args.add_config or [])
    delete = _parse_delete(args.delete_config or [])
    if not add and not delete:
        raise ConfigCommandError("At least one of --add-config or --delete-config must be specified with --alter")
    types = [t for t, _ in args.quota_entities]
    if types == ["ip"]:
        unknown = [k for k in [*add, *delete] if k not in IP_KEYS]
        if unknown:
            raise ConfigCommandError(
                "Only connection quota configs can be added for 'ip' using --bootstrap-server. "
                f"Unexpected config names: {','.join(unknown)}"
            )
        alter_quotas(conn, args.quota_entities, add, delete)
    else:
        scram_add = [k for k in add if k in SCRAM_MECHANISM_TYPES]
        scram_delete = [k for k in delete if k in SCRAM_MECHANISM_TYPES]
        unknown_add = [k for k in add if k not in SCRAM_MECHANISM_TYPES and k not in USER_CLIENT_KEYS]
        unknown_delete = [k for k in delete if k not in SCRAM_MECHANISM_TYPES and k not in USER_CLIENT_KEYS]
        quota_keys = [k for k in [*add, *delete] if k in USER_CLIENT_KEYS]
        if types != ["user"]:
            for keys, verb in ((unknown_add + scram_add, "added"), (unknown_delete + scram_delete, "deleted")):
                if keys:
                    raise ConfigCommandError(
                        f"Only quota configs can be {verb} for 'clients' using --bootstrap-server. "
                        f"Unexpected config names: {','.join(keys)}"
                    )
        else:
            for keys, verb in ((unknown_add, "added"), (unknown_delete, "deleted")):
                if keys:
                    raise ConfigCommandError(
                        f"Only quota and SCRAM credential configs can be {verb} for 'users' using --bootstrap-server. "
                        f"Unexpected config names: {','.join(keys)}"
                    )
            if scram_add or scram_delete:
                if args.quota_entities[0][1] == "":
                    raise ConfigCommandError(
                        "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
                        "using --bootstrap-server."
                    )
                if quota_keys:
                    raise ConfigCommandError(
                        "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                        "--bootstrap-server."
                    )
        if quota_keys:
            alter_quotas(conn, args.quota_entities, add, delete)
        else:
            alter_user_scram(conn, args.entity_name, add, delete)
    etype, name = args.entity_type, args.quota_entities[0][1]
    if name:
        print(f"Completed updating config for {etype[:-1]} {name}.", file=out)
    else:
        print(f"Completed updating default config for {etype} in the cluster.", file=out)


def alter_user_scram(conn: BrokerConnection, user: str, add: dict[str, str], delete: list[str]) -> None:
    """SCRAM credentials of a user (Kafka's alterUserScramCredentialConfigs): ``--add-config
    'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` (salted here with PBKDF2, as Kafka's admin
    client does), ``--delete-config SCRAM-SHA-512``."""
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
                "name": user,
                "mechanism": SCRAM_MECHANISM_TYPES[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted,
            }
        )
    deletions = [{"name": user, "mechanism": SCRAM_MECHANISM_TYPES[m]} for m in delete]
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


class _OrderedName(argparse.Action):
    """``--entity-name N`` / ``--entity-default``: appended to ``ordered_names`` in command-line order (``""`` for
    the default), so each name pairs with the entity type at the same position (Kafka's ``entityNames``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, "ordered_names", None) or [])
        if option_string == "--entity-default":
            names.append(BROKER_DEFAULT)
            namespace.entity_default = True
        else:
            names.append(values)
            namespace.entity_name = [*(namespace.entity_name or []), values]
        namespace.ordered_names = names


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-configs", description="Add/Remove entity config for a topic, client, user, broker or group."
    )
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    action.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--entity-type", action="append", help="Type of entity (topics/clients/users/brokers/ips/groups)")
    p.add_argument(
        "--entity-name", action=_OrderedName, help="Name of entity (topic name/client id/user principal/broker id/ip)"
    )
    p.add_argument(
        "--entity-default",
        action=_OrderedName,
        nargs=0,
        help="Default entity name for clients/users/brokers/ips (applies to corresponding entity type)",
    )
    p.set_defaults(entity_default=False, entity_name=None, ordered_names=[])
    p.add_argument("--topic", help="The topic's name.")
    p.add_argument("--broker", help="The broker's ID.")
    p.add_argument("--broker-defaults", action="store_true", help="The config defaults for all brokers.")
    p.add_argument("--group", help="The group's ID.")
    p.add_argument("--user", help="The user's principal name.")
    p.add_argument("--client", help="The client's ID.")
    p.add_argument("--ip", help="The IP address.")
    p.add_argument("--user-defaults", action="store_true", help="The config defaults for all users.")
    p.add_argument("--client-defaults", action="store_true", help="The config defaults for all clients.")
    p.add_argument("--ip-defaults", action="store_true", help="The config defaults for all IPs.")
    for shorthand in ("broker-logger", "client-metrics"):
        p.add_argument(f"--{shorthand}", help=argparse.SUPPRESS)
    p.add_argument("--add-config", action="append", help="Key Value pairs of configs to add: k1=v1,k2=[v1,v2,v2]")
    p.add_argument("--delete-config", action="append", help="config keys to remove: k1,k2")
    p.add_argument("--all", action="store_true", help="List all configs for the given entity, incl. static ones.")
    add_version_option(p)
    return p


def _resolve_entity(args) -> None:
    """Fold the shorthands (``--topic``, ``--user``, ``--client-defaults`` ...) into ``entity_type`` /
    ``entity_name``; for users/clients/ips also ``quota_entities``: [(quota entity type, name | "" | None)]."""
    types = list(args.entity_type or [])
    names = list(args.ordered_names or [])
    flags = [
        ("topic", "topics"),
        ("client", "clients"),
        ("user", "users"),
        ("broker", "brokers"),
        ("broker_logger", "broker-loggers"),
        ("ip", "ips"),
        ("client_metrics", "client-metrics"),
        ("group", "groups"),
    ]
    defaults = [
        ("client_defaults", "clients"),
        ("user_defaults", "users"),
        ("broker_defaults", "brokers"),
        ("ip_defaults", "ips"),
    ]
    used = [(f, t) for f, t in flags if getattr(args, f) is not None] + [
        (f, t) for f, t in defaults if getattr(args, f)
    ]
    if used and (args.entity_type or names):
        raise ConfigCommandError(
            "--entity-{type,name,default} should not be used in conjunction with specific entity flags"
        )
    types += [t for _, t in used]
    names += [getattr(args, f) for f, _ in flags if getattr(args, f) is not None]
    names += [BROKER_DEFAULT for f, _ in defaults if getattr(args, f)]
    if not types:
        raise ConfigCommandError("At least one entity type must be specified")
    if len(types) != len(set(types)):
        dup = sorted({t for t in types if types.count(t) > 1})
        raise ConfigCommandError(f"Duplicate entity type(s) specified: {','.join(dup)}")
    etype = types[0]
    for t in types:
        if t in UNSUPPORTED_TYPES:
            raise ConfigCommandError(
                f"Entity type {t} is not supported by this broker "
                "(supported: topics, brokers, groups, users, clients, ips)"
            )
        if t not in RESOURCE_TYPES and t not in QUOTA_ENTITY_TYPES:
            raise ConfigCommandError(
                f"Invalid entity type {t}, the entity type must be one of topics, clients, users, brokers, ips, groups"
            )
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise ConfigCommandError("Only 'users' and 'clients' entity types may be specified together")
    if len(names) > len(types):
        raise ConfigCommandError("More entity names specified than entity types")
    if args.all and not args.describe:
        raise ConfigCommandError("--all is only supported with --describe")
    if args.describe and (args.add_config or args.delete_config):
        raise ConfigCommandError("--add-config and --delete-config are only supported with --alter")
    args.entity_type = etype
    if etype in QUOTA_ENTITY_TYPES:
        padded: list[str | None] = [*names, *([None] * (len(types) - len(names)))]
        args.quota_entities = [(QUOTA_ENTITY_TYPES[t], n) for t, n in zip(types, padded, strict=True)]
        if etype == "ips":
            ip = padded[0]
            if ip and not valid_ip_entity(ip):
                raise ConfigCommandError(
                    f"The entity name for ips must be a valid IP or resolvable host, but it is: {ip}"
                )
        args.entity_name = padded[0]
        return
    if args.entity_default and etype != "brokers":
        raise ConfigCommandError(f"--entity-default is not supported for entity type {etype}")
    if len(names) > 1:
        raise ConfigCommandError("--entity-name and --entity-default cannot both be specified")
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
            if args.entity_type in QUOTA_ENTITY_TYPES:
                (describe_client_entities if args.describe else alter_client_entities)(conn, args, out)
            else:
                (describe if args.describe else alter)(conn, args, out)
    except QuotaCommandError as e:
        print(e, file=sys.stderr)
        return 1
    except (errors.KafkaError, OSError, ValueError) as e:
        print(f"Error while executing config command : {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
