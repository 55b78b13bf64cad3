"""kafka-acls: add, remove and list ACLs (``kafka.admin.AclCommand`` with ``--bootstrap-server``).

    bin/kafka-acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --operation Write --topic t
    bin/kafka-acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --operation Read --group g
    bin/kafka-acls --bootstrap-server HOST:PORT --list [--topic t] [--principal User:alice]
    bin/kafka-acls --bootstrap-server HOST:PORT --remove --force --allow-principal User:alice --operation Read --topic t

Resources: ``--topic``, ``--group``, ``--cluster``, ``--transactional-id``, ``--user-principal`` (each may
repeat), with ``--resource-pattern-type literal|prefixed`` (``any|match`` too for --list/--remove); principals
``--allow-principal`` / ``--deny-principal`` with ``--allow-host`` / ``--deny-host`` (default ``*``);
``--operation`` (Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All: Kafka's ``AclOperation``, from
:mod:`pykbroker.protocol.acl`). Output is Kafka's: ``Adding ACLs for resource `ResourcePattern(...)`:``
then one tab-indented ``(principal=..., host=..., operation=..., permissionType=...)`` per ACL, and
``Current ACLs for resource ...`` for --list. ``--remove`` without ``--force`` asks Kafka's y/n question.
Errors: ``Error while executing ACL command: <message>`` and exit status 1.
"""

from __future__ import annotations

import sys

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation, AclPermissionType
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import CLUSTER_NAME, PatternType, ResourceType
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging

# --resource-pattern-type values (UNKNOWN is not one).
_PATTERNS = frozenset(p.name for p in PatternType if p != PatternType.UNKNOWN)
# --operation: Kafka's SecurityUtils.operation accepts the PascalCase name in any case (ClusterAction,
# CLUSTERACTION); underscores are tolerated too. UNKNOWN and ANY are filter values, not operations to grant.
OPERATIONS = {op.name.replace("_", ""): op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
# A filter's operation and permission matching every ACL.
_ANY_ENTRY = {"operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY}
NL = "\n"


class AclCommandError(Exception):
    pass


def _name(enum_type, code: int) -> str | int:
    """Kafka's name of ``code`` in ``enum_type`` (an IntEnum of protocol/), or the code itself if unknown."""
    try:
        return enum_type(code).name
    except ValueError:
        return code


def resource_text(rtype: int, name: str, pattern: int) -> str:
    kind, patt = _name(ResourceType, rtype), _name(PatternType, pattern)
    return f"ResourcePattern(resourceType={kind}, name={name}, patternType={patt})"


def entry_text(principal: str, host: str, operation: int, permission: int) -> str:
    return (
        f"(principal={principal}, host={host}, operation={_name(AclOperation, operation)}, "
        f"permissionType={_name(AclPermissionType, permission)})"
    )


def _resources(args, pattern: int) -> list[tuple[int, str, int]]:
    out: list[tuple[int, str, int]] = [(ResourceType.TOPIC, t, pattern) for t in args.topic or []]
    out += [(ResourceType.GROUP, g, pattern) for g in args.group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id or []]
    out += [(ResourceType.USER, u.strip(), pattern) for u in args.user_principal or []]
    out += [(ResourceType.DELEGATION_TOKEN, t.strip(), pattern) for t in args.delegation_token or []]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, pattern))
    return out


def _entries(args) -> list[tuple[str, str, int, int]]:
    operations = [OPERATIONS[o.upper().replace("_", "")] for o in (args.operation or [])]
    out: list[tuple[str, str, int, int]] = []
    for principals, hosts, permission in (
        (args.allow_principal or [], args.allow_host or ["*"], AclPermissionType.ALLOW),
        (args.deny_principal or [], args.deny_host or ["*"], AclPermissionType.DENY),
    ):
        for principal in principals:
            for host in hosts:
                for op in operations:
                    out.append((principal, host, op, permission))
    return out


def _check(code: int, message: str | None) -> None:
    if code != errors.NONE:
        raise AclCommandError(message or errors.for_code(code).default_message)


def main(argv: list[str] | None = None, out=sys.stdout, stdin=sys.stdin) -> int:
    if out is sys.stdout:
        configure_tool_logging()
    p = ToolArgumentParser(prog="kafka-acls", description="This tool helps to manage acls on kafka.")
    p.add_argument("--bootstrap-server", required=True, help="A list of host/port pairs to use for the connection.")
    p.add_argument("--command-config", help="A property file containing configs to be passed to Admin Client.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    action.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    action.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    p.add_argument("--topic", action="append", help="topic to which ACLs should be added or removed.")
    p.add_argument("--group", action="append", help="Consumer Group to which the ACLs should be added or removed.")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--transactional-id", action="append", help="The transactionalId to which ACLs should be added.")
    p.add_argument(
        "--user-principal",
        action="append",
        help="Specifies a user principal as a resource in relation with the operation. For instance one could grant "
        "CreateTokens or DescribeTokens permission on a given user principal.",
    )
    p.add_argument(
        "--delegation-token",
        action="append",
        help="Delegation token to which ACLs should be added or removed. A value of '*' indicates ACL should apply to "
        "all tokens.",
    )
    p.add_argument("--resource-pattern-type", default=None, help="literal, prefixed (any, match for --list/--remove)")
    p.add_argument("--allow-principal", action="append", help="principal in PrincipalType:name format")
    p.add_argument("--deny-principal", action="append", help="principal in PrincipalType:name format")
    p.add_argument("--allow-host", action="append", help="Host from which principals will have access")
    p.add_argument("--deny-host", action="append", help="Host from which principals will be denied access")
    p.add_argument("--operation", action="append", help="Operation that is being allowed or denied.")
    p.add_argument("--principal", action="append", help="List ACLs for the specified principal.")
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    add_version_option(p)
    args = p.parse_args(argv)
    try:
        pattern_name = (args.resource_pattern_type or ("ANY" if args.list else "LITERAL")).upper()
        if pattern_name not in _PATTERNS or (args.add and pattern_name not in ("LITERAL", "PREFIXED")):
            raise AclCommandError(f"A '--resource-pattern-type' value of '{pattern_name.lower()}' is not valid here")
        pattern = PatternType[pattern_name]
        resources = _resources(args, pattern)
        with BrokerConnection.to(args.bootstrap_server, client_id="kafka-acls") as conn:
            if args.add:
                entries = _entries(args)
                if not resources:
                    raise AclCommandError("You must specify one of: --topic, --cluster, --group, --transactional-id")
                if not entries:
                    raise AclCommandError(
                        "You must specify one of: --allow-principal, --deny-principal and an --operation"
                    )
                for rtype, name, pat in resources:
                    print(f"Adding ACLs for resource `{resource_text(rtype, name, pat)}`: {NL} "
                          f"{NL.join(chr(9) + entry_text(*e) for e in entries)} {NL}", file=out)  # fmt: skip
                    creations = [
                        {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pat,
                         "principal": e[0], "host": e[1], "operation": e[2], "permission_type": e[3]}
                        for e in entries
                    ]  # fmt: skip
                    r = conn.request(ApiKeys.CREATE_ACLS, 3, {"creations": creations})
                    for res in r["results"]:
                        _check(res["error_code"], res["error_message"])
            elif args.remove:
                entries = _entries(args)
                if not resources:
                    raise AclCommandError("You must specify one of: --topic, --cluster, --group, --transactional-id")
                for rtype, name, pat in resources:
                    if not args.force:
                        print(
                            "Are you sure you want to remove ACLs for resource filter "
                            f"`{resource_text(rtype, name, pat)}`? (y/n)",
                            file=out,
                        )
                        if stdin.readline().strip().lower() != "y":
                            continue
                    filters = [
                        {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pat,
                         "principal_filter": e[0], "host_filter": e[1], "operation": e[2], "permission_type": e[3]}
                        for e in entries
                    ] or [
                        {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pat,
                         "principal_filter": None, "host_filter": None, **_ANY_ENTRY}
                    ]  # fmt: skip
                    r = conn.request(ApiKeys.DELETE_ACLS, 3, {"filters": filters})
                    for res in r["filter_results"]:
                        _check(res["error_code"], res["error_message"])
            else:
                describe: list[tuple[int, str | None, int]] = list(resources) or [(ResourceType.ANY, None, pattern)]
                principals = args.principal or [None]
                for d_type, d_name, d_pattern in describe:  # (resource type, name or None: any, pattern type)
                    r = conn.request(
                        ApiKeys.DESCRIBE_ACLS,
                        3,
                        {"resource_type_filter": d_type, "resource_name_filter": d_name,
                         "pattern_type_filter": d_pattern,
                         "principal_filter": None, "host_filter": None, **_ANY_ENTRY},
                    )  # fmt: skip
                    _check(r["error_code"], r["error_message"])
                    for principal in principals:
                        if principal is not None:
                            print(f"ACLs for principal `{principal}`", file=out)
                        for res in r["resources"]:
                            acls = [a for a in res["acls"] if principal is None or a["principal"] == principal]
                            if not acls:
                                continue
                            lines = NL.join(
                                chr(9) + entry_text(a["principal"], a["host"], a["operation"], a["permission_type"])
                                for a in acls
                            )
                            text = resource_text(res["resource_type"], res["resource_name"], res["pattern_type"])
                            print(f"Current ACLs for resource `{text}`: {NL} {lines} {NL}", file=out)
    except (AclCommandError, errors.KafkaError, OSError) as e:
        print(f"Error while executing ACL command: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
