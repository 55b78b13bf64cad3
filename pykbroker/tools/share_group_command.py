"""kafka-share-groups: list, describe and delete share groups, reset and delete their offsets (KIP-932;
``org.apache.kafka.tools.consumer.group.ShareGroupCommand``).

    bin/kafka-share-groups --bootstrap-server HOST:PORT --list [--state [Stable,Empty]]
    bin/kafka-share-groups --bootstrap-server HOST:PORT --describe --group G [--offsets | --members | --state]
        [--verbose]
    bin/kafka-share-groups --bootstrap-server HOST:PORT --delete --group G
    bin/kafka-share-groups --bootstrap-server HOST:PORT --reset-offsets --group G (--topic T[:P,...] | --all-topics)
        (--to-earliest | --to-latest | --to-datetime YYYY-MM-DDTHH:mm:SS.sss) [--dry-run | --execute]
    bin/kafka-share-groups --bootstrap-server HOST:PORT --delete-offsets --group G --topic T [--topic T2]

``--describe`` (or ``--offsets``) prints GROUP, TOPIC, PARTITION, START-OFFSET, LAG (the share-partition start
offset and lag, DescribeShareGroupOffsets v1, KIP-1226; ``-`` where unknown: no state yet), ``--verbose`` adds
LEADER-EPOCH after PARTITION (Kafka 4.2's columns); ``--members`` prints GROUP,
CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS, ASSIGNMENT (``topic:0,1``), ``--verbose`` adds MEMBER-EPOCH;
``--state`` prints GROUP, COORDINATOR (ID), STATE, #MEMBERS, ``--verbose`` adds GROUP-EPOCH, ASSIGNMENT-EPOCH
(ShareGroupDescribe). A group without members gets ``Share group 'G' has no active members.`` on stderr; a group
that does not exist ``Error: Share group 'G' does not exist.``. ``--list`` prints the share groups' ids (ListGroups
with type ``share``), with ``--state`` the GROUP and STATE columns. ``--reset-offsets`` (AlterShareGroupOffsets)
and ``--delete-offsets`` (DeleteShareGroupOffsets) need a group without members; without ``--execute`` a reset
only prints the new offsets (GROUP, TOPIC, PARTITION, NEW-OFFSET). Requests go to the group's coordinator
(FindCoordinator).
"""

from __future__ import annotations

import argparse
import sys

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging
from pykbroker.tools.consumer_group_command import Admin, CommandError, UsageError, _table, get_date_time

SHARE_GROUP_STATES = ("Stable", "Empty", "Dead")


class ShareAdmin(Admin):
    """The share group requests of the tool, over the consumer-group tool's :class:`Admin`."""

    def describe_share_group(self, group: str) -> dict:
        """The ShareGroupDescribe entry of ``group`` (raises CommandError for an error other than
        GROUP_ID_NOT_FOUND, which comes back as state Dead)."""
        conn = self.coordinator(group)
        try:
            (g,) = self._request_retrying(
                conn,
                ApiKeys.SHARE_GROUP_DESCRIBE,
                1,
                {"group_ids": [group], "include_authorized_operations": False},
                lambda r: r["groups"][0]["error_code"],
            )["groups"]
        finally:
            conn.close()
        if g["error_code"] == errors.GROUP_ID_NOT_FOUND:
            return dict(g, group_state="Dead", members=[])
        if g["error_code"] != errors.NONE:
            raise CommandError(f"Error describing group {group}: {errors.name_of(g['error_code'])}")
        return g

    def share_offsets(self, group: str, topics: list[dict] | None = None) -> list[tuple[str, int, int, int, int]]:
        """``[(topic, partition, start offset, leader epoch, lag)]`` of the group (DescribeShareGroupOffsets v1; a
        Kafka 4.1 coordinator answers v0: lag -1)."""
        conn = self.coordinator(group)
        try:
            (g,) = self._request_retrying(
                conn,
                ApiKeys.DESCRIBE_SHARE_GROUP_OFFSETS,
                1,
                {"groups": [{"group_id": group, "topics": topics}]},
                lambda r: r["groups"][0]["error_code"],
            )["groups"]
        finally:
            conn.close()
        if g["error_code"] != errors.NONE:
            raise CommandError(f"Error describing offsets of group {group}: {errors.name_of(g['error_code'])}")
        out = []
        for t in g["topics"]:
            for p in t["partitions"]:
                if p["error_code"] != errors.NONE:
                    raise CommandError(
                        f"Error describing offsets of {t['topic_name']}-{p['partition_index']}: "
                        f"{errors.name_of(p['error_code'])}"
                    )
                lag = p.get("lag", -1)
                out.append((t["topic_name"], p["partition_index"], p["start_offset"], p["leader_epoch"], lag))
        return sorted(out)

    def coordinator_request(self, group: str, api_key: int, body: dict) -> dict:
        conn = self.coordinator(group)
        try:
            return self._request_retrying(conn, api_key, 0, body, lambda r: r["error_code"])
        finally:
            conn.close()


def _check_group(description: dict, group: str, rows: int, out) -> bool:
    """Kafka's ``maybePrintEmptyGroupState``: whether the rows are printed."""
    if description["group_state"] == "Dead":
        print(f"\nError: Share group '{group}' does not exist.", file=out)
        return False
    if description["group_state"] == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
    return rows > 0


def _assignment(member: dict) -> list[tuple[str, int]]:
    return sorted((tp["topic_name"], p) for tp in member["assignment"]["topic_partitions"] for p in tp["partitions"])


def describe_offsets(admin: ShareAdmin, group: str, out, verbose: bool = False) -> None:
    description = admin.describe_share_group(group)
    if description["group_state"] == "Dead":
        _check_group(description, group, 0, out)
        return
    offsets = admin.share_offsets(group)
    if not _check_group(description, group, len(offsets), out):
        return
    rows = []
    for t, p, start, epoch, lag in offsets:
        row = [group, t, str(p)]
        row += ["-" if epoch < 0 else str(epoch)] if verbose else []
        rows.append(row + ["-" if start < 0 else str(start), "-" if lag < 0 else str(lag)])
    header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]
    for line in _table(rows, header, {0: 15, 1: 15}):
        print(line, file=out)


def describe_members(admin: ShareAdmin, group: str, out, verbose: bool) -> None:
    description = admin.describe_share_group(group)
    members = sorted(description["members"], key=lambda m: m["member_id"])
    if not _check_group(description, group, len(members), out):
        return
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    header += ["MEMBER-EPOCH", "ASSIGNMENT"] if verbose else ["ASSIGNMENT"]
    rows = []
    for m in members:
        tps = _assignment(m)
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        assignment = ",".join(f"{t}:{p}" for t, p in tps) if tps else "-"
        row = [group, m["member_id"], m["client_host"], m["client_id"], str(len(tps))]
        row += [str(m["member_epoch"]), assignment] if verbose else [assignment]
        rows.append(row)
    for line in _table(rows, header, {0: 15, 1: 15, 2: 15, 3: 15}):
        print(line, file=out)


def describe_state(admin: ShareAdmin, group: str, out, verbose: bool) -> None:
    description = admin.describe_share_group(group)
    _check_group(description, group, 1, out)
    if description["group_state"] == "Dead":
        return
    node, host, port = admin.find_coordinator(group)
    coordinator = f"{host}:{port}  ({node})"
    header = ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"]
    row = [group, coordinator, description["group_state"], str(len(description["members"]))]
    if verbose:
        header[3:3] = ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row[3:3] = [str(description["group_epoch"]), str(description["assignment_epoch"])]
    for line in _table([row], header, {0: 15, 1: 25, 2: 15}):
        print(line, file=out)


def list_groups(admin: ShareAdmin, states: list[str] | None, out) -> None:
    groups = admin.list_groups(states or None, ["share"])
    if states is None:
        for g in groups:
            print(g["group_id"], file=out)
        return
    for line in _table([[g["group_id"], g["group_state"]] for g in groups], ["GROUP", "STATE"], {0: 15}):
        print(line, file=out)


def parse_states(text: str) -> list[str]:
    states = [s.strip() for s in text.split(",") if s.strip()]
    by_lower = {s.lower(): s for s in SHARE_GROUP_STATES}
    if not states or any(s.lower() not in by_lower for s in states):
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(SHARE_GROUP_STATES)}")
    return [by_lower[s.lower()] for s in states]


def _topic_partitions(admin: ShareAdmin, args) -> list[tuple[str, int]]:
    """The partitions to reset: ``--topic T`` (every partition) or ``T:0,2``; ``--all-topics``: the partitions the
    group has share-partition state for."""
    if args.all_topics:
        return [(t, p) for t, p, *_ in admin.share_offsets(args.group)]
    out: list[tuple[str, int]] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if parts:
            out += [(topic, int(p)) for p in parts.split(",") if p.strip()]
        else:
            out += [(topic, p) for p in admin.partitions(topic)]
    return out


def reset_offsets(admin: ShareAdmin, args, out) -> int:
    description = admin.describe_share_group(args.group)
    if description["group_state"] == "Dead":
        raise CommandError(f"Share group '{args.group}' does not exist.")
    if description["members"]:
        raise CommandError(
            f"Share group '{args.group}' is not empty: offsets can only be reset if the group is inactive, but "
            f"the current state is {description['group_state']}."
        )
    tps = _topic_partitions(admin, args)
    if args.to_earliest:
        new = admin.list_offsets(tps, -2)
    elif args.to_latest:
        new = admin.list_offsets(tps, -1)
    else:
        stamp = get_date_time(args.to_datetime)
        found = admin.list_offsets(tps, stamp)
        latest = admin.list_offsets([tp for tp in tps if found.get(tp, -1) < 0], -1)
        new = {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in tps if tp in found or tp in latest}
    if args.execute:
        topics: dict[str, list[dict]] = {}
        for (t, p), offset in sorted(new.items()):
            topics.setdefault(t, []).append({"partition_index": p, "start_offset": offset})
        r = admin.coordinator_request(
            args.group,
            ApiKeys.ALTER_SHARE_GROUP_OFFSETS,
            {"group_id": args.group, "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]},
        )
        if r["error_code"] != errors.NONE:
            raise CommandError(f"{errors.name_of(r['error_code'])}: {r['error_message'] or ''}".rstrip(": "))
        for t in r["responses"]:
            for p in t["partitions"]:
                if p["error_code"] != errors.NONE:
                    raise CommandError(
                        f"Error resetting {t['topic_name']}-{p['partition_index']}: {errors.name_of(p['error_code'])}"
                    )
    rows = [[args.group, t, str(p), str(o)] for (t, p), o in sorted(new.items())]
    for line in _table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], {0: 15, 1: 15}):
        print(line, file=out)
    return 0


def delete_offsets(admin: ShareAdmin, args, out) -> int:
    r = admin.coordinator_request(
        args.group,
        ApiKeys.DELETE_SHARE_GROUP_OFFSETS,
        {"group_id": args.group, "topics": [{"topic_name": t} for t in args.topic]},
    )
    if r["error_code"] != errors.NONE:
        error = errors.for_code(r["error_code"])
        raise CommandError(f"{error.__name__}: {r['error_message'] or error.default_message}")
    rows = []
    failed = False
    for t in r["responses"]:
        if t["error_code"] == errors.NONE:
            rows.append([t["topic_name"], "Successful"])
        else:
            failed = True
            error = errors.for_code(t["error_code"])
            rows.append([t["topic_name"], f"Error: {t['error_message'] or error.default_message}"])
    for line in _table(rows, ["TOPIC", "STATUS"], {0: 15}):
        print(line, file=out)
    return 1 if failed else 0


def delete_group(admin: ShareAdmin, group: str, out) -> int:
    conn = admin.coordinator(group)
    try:
        (r,) = conn.request(ApiKeys.DELETE_GROUPS, 2, {"groups_names": [group]})["results"]
    finally:
        conn.close()
    if r["error_code"] == errors.NONE:
        print(f"Deletion of requested share groups ('{group}') was successful.", file=out)
        return 0
    error = errors.for_code(r["error_code"])
    print(
        f"Deletion of some share groups failed:\n* Share group '{group}' could not be deleted due to: "
        f"{error.__name__}: {error.default_message}",
        file=out,
    )
    return 1


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-share-groups",
        description="This tool helps to list, describe, reset and delete share groups.",
    )
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: The server(s) to connect to.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="List all share groups.")
    action.add_argument("--describe", action="store_true", help="Describe share group, members and offset information.")
    action.add_argument("--delete", action="store_true", help="Delete share group.")
    action.add_argument("--reset-offsets", action="store_true", help="Reset offsets of share group.")
    action.add_argument("--delete-offsets", action="store_true", help="Delete offsets of share group.")
    p.add_argument("--group", help="The share group we wish to act on.")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--all-topics", action="store_true")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--members", action="store_true", help="Describe members of the group.")
    what.add_argument("--offsets", action="store_true", help="Describe the group's offsets (the default).")
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        help="With --describe: the group's state; with --list: the groups' states, only those given if a list follows.",
    )
    p.add_argument("--verbose", action="store_true", help="Provide additional information when describing the group.")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    target.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    target.add_argument(
        "--to-datetime", help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'"
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    mode.add_argument("--execute", action="store_true", help="Execute operation.")
    add_version_option(p)
    return p


def _check_args(args) -> None:
    """Kafka's ShareGroupCommandOptions.checkArgs, for the options this tool has."""
    if (args.describe or args.delete or args.reset_offsets or args.delete_offsets) and not args.group:
        raise UsageError("Option [describe|delete|reset-offsets|delete-offsets] takes the option: [group]")
    if args.state is not None and not (args.list or args.describe):
        raise UsageError('Option "[state]" can only be used with options "[list]" or "[describe]"')
    if args.state and args.describe:
        raise UsageError("Option [describe] does not take a value for [state]")
    if (args.members or args.offsets) and not args.describe:
        raise UsageError('Option "[members|offsets]" can only be used with option "[describe]"')
    if (args.members or args.offsets) and args.state is not None:
        raise UsageError('Option "[members|offsets]" can\'t be used with option "[state]"')
    if args.verbose and not args.describe:
        raise UsageError("Option(s) [verbose] are unavailable given other options on the command line")
    if args.reset_offsets:
        if not (args.to_earliest or args.to_latest or args.to_datetime):
            raise UsageError("Option [reset-offsets] takes one of [to-earliest], [to-latest], [to-datetime]")
        if bool(args.topic) == bool(args.all_topics):
            raise UsageError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    if args.delete_offsets and not args.topic:
        raise UsageError("Option [delete-offsets] takes the option: [topic]")
    if args.list and args.state:
        parse_states(args.state)


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:
        configure_tool_logging()
    args = _parser().parse_args(argv)
    try:
        _check_args(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 1
    admin = None
    try:
        admin = ShareAdmin(args.bootstrap_server)
        if args.list:
            list_groups(admin, parse_states(args.state) if args.state else [] if args.state is not None else None, out)
        elif args.describe:
            if args.state is not None:
                describe_state(admin, args.group, out, args.verbose)
            elif args.members:
                describe_members(admin, args.group, out, args.verbose)
            else:
                describe_offsets(admin, args.group, out, args.verbose)
        elif args.delete:
            return delete_group(admin, args.group, out)
        elif args.delete_offsets:
            return delete_offsets(admin, args, out)
        else:
            if not args.dry_run and not args.execute:
                print(
                    "WARN: No action will be performed as the --execute option is missing. You should add the "
                    "--dry-run option explicitly if you are scripting this command.",
                    file=sys.stderr,
                )
            return reset_offsets(admin, args, out)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 1
    except (CommandError, errors.KafkaError, OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    finally:
        if admin is not None:
            admin.close()
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
