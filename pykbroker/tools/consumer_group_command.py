"""kafka-consumer-groups: list, describe, delete groups and reset their offsets
(``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``).

    bin/kafka-consumer-groups --bootstrap-server HOST:PORT --list [--state [Stable,Empty,...]]
        [--type [classic,consumer]]
    bin/kafka-consumer-groups --bootstrap-server HOST:PORT --describe (--group G | --all-groups) [--members | --state]
        [--verbose]
    bin/kafka-consumer-groups --bootstrap-server HOST:PORT --delete (--group G | --all-groups)
    bin/kafka-consumer-groups --bootstrap-server HOST:PORT --reset-offsets --group G (--topic T | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss
         | --by-duration PnDTnHnMnS | --to-current | --from-file plan.csv) [--dry-run | --execute] [--export]

``--describe`` prints Kafka's columns GROUP, TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG,
CONSUMER-ID, HOST, CLIENT-ID (``-`` where unknown), one row per assigned or committed partition;
``--members`` prints GROUP, CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS; ``--state`` prints GROUP,
COORDINATOR (ID), ASSIGNMENT-STRATEGY, STATE, #MEMBERS. ``--verbose`` adds Kafka 4's columns (KIP-1099):
CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH, TARGET-ASSIGNMENT to ``--members`` and GROUP-EPOCH,
TARGET-ASSIGNMENT-EPOCH to ``--state`` (``-`` for a classic group). ``--list --state`` prints GROUP and STATE
columns, only the groups in the given states when a list follows; ``--type`` adds the TYPE column (Classic,
Consumer), only the groups of the given types when a list follows (ListGroups v5, KIP-1043).
``--all-groups``: every group. Offsets are reset only for an
inactive (Empty) group, as in Kafka; without ``--execute`` the new offsets are only printed (a dry run).
``--to-datetime`` and ``--by-duration`` find offsets by timestamp (ListOffsets), falling back to the log end where
no record is that recent. ``--export`` prints the new offsets as Kafka's CSV (``topic,partition,offset`` for
one group, ``group,topic,partition,offset`` for several) instead of the table; ``--from-file`` reads such a
file back as the reset plan (the partitions come from the file). Requests go to the group's coordinator
(FindCoordinator).
"""

from __future__ import annotations

import argparse
import datetime
import logging
import re
import struct
import sys
import time
import uuid

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging

log = logging.getLogger(__name__)


class CommandError(Exception):
    pass


class UsageError(Exception):
    """Bad arguments (Kafka: printUsageAndExit): the message on stderr, exit status 1."""


# org.apache.kafka.common.GroupState names valid for consumer groups
CONSUMER_GROUP_STATES = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
)
REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


def parse_assignment(data: bytes) -> list[tuple[str, int]]:
    """ConsumerProtocolAssignment: version int16, [topic string, [partition int32]], user data."""
    out: list[tuple[str, int]] = []
    if not data or len(data) < 6:
        return out
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(max(0, n)):
        (length,) = struct.unpack_from(">h", data, pos)
        topic = bytes(data[pos + 2 : pos + 2 + length]).decode()
        pos += 2 + length
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(0, count)):
            out.append((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out


class Admin:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.conn = BrokerConnection.to(bootstrap, client_id="kafka-consumer-groups")

    def close(self) -> None:
        self.conn.close()

    def find_coordinator(self, group: str) -> tuple[int, str, int]:
        """``(node id, host, port)`` of ``group``'s coordinator; retriable errors (the offsets topic being created
        or loaded) are retried for up to 30 s, as the admin client retries within default.api.timeout.ms."""
        deadline = time.monotonic() + 30
        while True:
            r = self.conn.request(ApiKeys.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
            code = r["error_code"]
            if code == errors.NONE or not errors.for_code(code).retriable or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if r["error_code"] != errors.NONE:
            raise CommandError(f"FindCoordinator for group {group} failed: {errors.name_of(r['error_code'])}")
        return r["node_id"], r["host"], r["port"]

    def coordinator(self, group: str) -> BrokerConnection:
        _, host, port = self.find_coordinator(group)
        return BrokerConnection(host, port, client_id="kafka-consumer-groups")

    @staticmethod
    def _request_retrying(conn, api_key: int, version: int, body: dict, code_of) -> dict:
        """One request, again for up to 30 s while its error is COORDINATOR_LOAD_IN_PROGRESS or
        COORDINATOR_NOT_AVAILABLE (the coordinator loads or is created), as the admin client retries
        within default.api.timeout.ms."""
        deadline = time.monotonic() + 30
        while True:
            r = conn.request(api_key, version, body)
            code = code_of(r)
            if code not in (errors.COORDINATOR_LOAD_IN_PROGRESS, errors.COORDINATOR_NOT_AVAILABLE):
                return r
            if time.monotonic() > deadline:
                return r
            time.sleep(0.1)

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None) -> list[dict]:
        """Every group (``states``: only those in one of these states; ``types``: of these types, KIP-1043), sorted
        by id; ListGroups v5 (each group's ``group_type``)."""
        r = self._request_retrying(
            self.conn,
            ApiKeys.LIST_GROUPS,
            5,
            {"states_filter": states or [], "types_filter": types or []},
            lambda r: r["error_code"],
        )
        if r["error_code"] != errors.NONE:
            raise CommandError(f"Error listing groups: {errors.name_of(r['error_code'])}")
        wanted = {s.lower() for s in states or []}
        groups = [g for g in r["groups"] if not wanted or g["group_state"].lower() in wanted]
        return sorted(groups, key=lambda g: g["group_id"])

    def describe(self, conn, group: str) -> dict:
        (g,) = self._request_retrying(
            conn,
            ApiKeys.DESCRIBE_GROUPS,
            5,
            {"groups": [group], "include_authorized_operations": False},
            lambda r: r["groups"][0]["error_code"],
        )["groups"]
        if g["error_code"] != errors.NONE:
            raise CommandError(f"Error describing group {group}: {errors.name_of(g['error_code'])}")
        if g["group_state"] == "Dead":  # not a classic group: maybe a KIP-848 consumer group
            return self.describe_consumer_group(conn, group) or g
        return g

    def describe_consumer_group(self, conn, group: str) -> dict | None:
        """A KIP-848 consumer group through ConsumerGroupDescribe, in DescribeGroups' shape (``protocol_data``: the
        assignor; each member's ``partitions``: ``[(topic, partition)]`` of its current assignment); None when the
        group is no consumer group or the broker does not serve the API."""
        try:
            r = conn.request(
                ApiKeys.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False}
            )
        except errors.KafkaError:
            return None
        (g,) = r["groups"]
        if g["error_code"] != errors.NONE:
            return None
        members = [
            {
                "member_id": m["member_id"],
                "group_instance_id": m["instance_id"],
                "client_id": m["client_id"],
                "client_host": m["client_host"],
                "partitions": sorted(
                    (tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]
                ),
                "member_epoch": m["member_epoch"],
                "target_partitions": sorted(
                    (tp["topic_name"], p) for tp in m["target_assignment"]["topic_partitions"] for p in tp["partitions"]
                ),
            }
            for m in g["members"]
        ]
        return {
            "group_state": g["group_state"],
            "protocol_data": g["assignor_name"],
            "members": members,
            "group_epoch": g["group_epoch"],
            "assignment_epoch": g["assignment_epoch"],
        }

    def committed(self, conn, group: str) -> dict[tuple[str, int], int]:
        r = self._request_retrying(
            conn,
            ApiKeys.OFFSET_FETCH,
            7,
            {"group_id": group, "topics": None, "require_stable": False},
            lambda r: r["error_code"],
        )
        if r["error_code"] != errors.NONE:
            raise CommandError(f"Error fetching the offsets of group {group}: {errors.name_of(r['error_code'])}")
        return {
            (t["name"], p["partition_index"]): p["committed_offset"]
            for t in r["topics"]
            for p in t["partitions"]
            if p["committed_offset"] >= 0
        }

    def list_offsets(self, tps, timestamp: int) -> dict[tuple[str, int], int]:
        topics: dict[str, list] = {}
        for t, p in tps:
            topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp})
        if not topics:
            return {}
        r = self.conn.request(
            ApiKeys.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        return {
            (t["name"], p["partition_index"]): p["offset"]
            for t in r["topics"]
            for p in t["partitions"]
            if p["error_code"] == errors.NONE
        }

    def partitions(self, topic: str) -> list[int]:
        r = self.conn.request(
            ApiKeys.METADATA,
            12,
            {
                "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        (t,) = r["topics"]
        if t["error_code"] != errors.NONE:
            raise CommandError(f"Topic {topic} : {errors.name_of(t['error_code'])}")
        return sorted(p["partition_index"] for p in t["partitions"])


def _member_partitions(m: dict) -> list[tuple[str, int]]:
    """A described member's partitions: a consumer group's from ConsumerGroupDescribe, a classic one's from its
    ConsumerProtocolAssignment."""
    if "partitions" in m:
        return m["partitions"]
    return parse_assignment(m["member_assignment"])


def _table(rows: list[list[str]], header: list[str], fixed: dict[int, int]) -> list[str]:
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]
    for i, w in fixed.items():
        widths[i] = max(widths[i], w)
    fmt = lambda r: " ".join(c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r))  # noqa: E731
    return [fmt(header)] + [fmt(r) for r in rows]


def _assignment_text(tps: list[tuple[str, int]]) -> str:
    """A member's partitions as the verbose columns print them: ``topic:0,1;other:2``, ``-`` when none."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in tps:
        by_topic.setdefault(topic, []).append(p)
    if not by_topic:
        return "-"
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items()))


def describe(admin: Admin, group: str, members_only: bool, out, verbose: bool = False) -> None:
    conn = admin.coordinator(group)
    try:
        g = admin.describe(conn, group)
        committed = admin.committed(conn, group)
    finally:
        conn.close()
    if g["group_state"] == "Dead":
        raise CommandError(f"Consumer group '{group}' does not exist.")
    members = g["members"]
    print("", file=out)
    if members_only:
        rows = [
            [
                group,
                m["member_id"],
                m["client_host"],
                m["client_id"],
                str(len(_member_partitions(m))),
            ]
            for m in members
        ]
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if verbose:  # Kafka 4's columns (KIP-1099): epochs and assignments; "-" where a classic group has none
            header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
            consumer = "group_epoch" in g
            for row, m in zip(rows, members, strict=True):
                row += [
                    str(m["member_epoch"]) if consumer else "-",
                    _assignment_text(_member_partitions(m)),
                    str(g["assignment_epoch"]) if consumer else "-",
                    _assignment_text(m["target_partitions"]) if consumer else "-",
                ]
        if not members:
            print(f"Consumer group '{group}' has no active members.", file=out)
        for line in _table(rows, header, {}):
            print(line, file=out)
        return
    owner: dict[tuple[str, int], dict] = {}
    for m in members:
        for tp in _member_partitions(m):
            owner[tp] = m
    tps = sorted(set(owner) | set(committed))
    ends = admin.list_offsets(tps, -1)
    if not members:
        print(f"Consumer group '{group}' has no active members.", file=out)
    rows = []
    for tp in tps:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else None
        m = owner.get(tp)
        rows.append(
            [
                group,
                tp[0],
                str(tp[1]),
                "-" if current is None else str(current),
                "-" if end is None else str(end),
                "-" if lag is None else str(lag),
                m["member_id"] if m else "-",
                m["client_host"] if m else "-",
                m["client_id"] if m else "-",
            ]
        )
    header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    for line in _table(rows, header, {2: 10, 3: 15, 4: 15, 5: 15}):
        print(line, file=out)


def describe_state(admin: Admin, group: str, out, verbose: bool = False) -> None:
    """Kafka's ``printStates``: GROUP, COORDINATOR (ID), ASSIGNMENT-STRATEGY, STATE, #MEMBERS; ``verbose`` adds
    GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH before #MEMBERS (Kafka 4, KIP-1099; ``-`` for a classic group)."""
    node_id, host, port = admin.find_coordinator(group)
    with BrokerConnection(host, port, client_id="kafka-consumer-groups") as conn:
        g = admin.describe(conn, group)
    if g["group_state"] == "Dead":
        raise CommandError(f"Consumer group '{group}' does not exist.")
    if g["group_state"] == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif g["group_state"] in REBALANCING_STATES:
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    coordinator = f"{host}:{port}  ({node_id})"
    group_width, coordinator_width = max(15, len(group)), max(25, len(coordinator))

    def row(*cells: object) -> str:
        name, coord, strategy, state, *epochs, members = (str(c) for c in cells)
        line = f"{name:<{group_width}} {coord:<{coordinator_width}} {strategy:<20} {state:<20} "
        if epochs:
            line += f"{epochs[0]:<15} {epochs[1]:<25} "
        return line + members

    epochs: list[object] = []
    if verbose:
        epochs = [g.get("group_epoch", "-"), g.get("assignment_epoch", "-")]
    print("", file=out)
    header_epochs = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if verbose else []
    print(row("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", *header_epochs, "#MEMBERS"), file=out)
    print(row(group, coordinator, g["protocol_data"] or "-", g["group_state"], *epochs, len(g["members"])), file=out)


def list_with_state(admin: Admin, states: list[str], out, types: list[str] | None = None, state: bool = True) -> None:
    """Kafka's ``printGroupInfo``: GROUP, then TYPE when ``types`` is given (``--type``: Classic, Consumer; only
    those types when the list is not empty), then STATE when ``state``: ``%-{max(15, longest id) + 10}s`` and
    ``%-20s`` per column."""
    groups = admin.list_groups(states, [t.lower() for t in types or []])
    width = max([15] + [len(g["group_id"]) for g in groups]) + 10
    header = [f"{'GROUP':<{width}}"] + (["TYPE".ljust(20)] if types is not None else [])
    print(" ".join(header + (["STATE".ljust(20)] if state else [])), file=out)
    for g in groups:
        cells = [f"{g['group_id']:<{width}}"]
        if types is not None:
            cells.append((GROUP_TYPES.get(g.get("group_type") or "", "Unknown")).ljust(20))
        if state:
            cells.append((g["group_state"] or "Unknown").ljust(20))
        print(" ".join(cells), file=out)


#: ListGroups' group types as Kafka's ``GroupType.toString``
GROUP_TYPES = {"consumer": "Consumer", "classic": "Classic", "share": "Share"}


def parse_types(text: str) -> list[str]:
    """``"classic,Consumer"`` -> Kafka's type names (``consumerGroupTypesFromString``); CommandError for an unknown
    one."""
    types = [GROUP_TYPES.get(t.strip().lower()) for t in text.split(",")]
    if None in types:
        raise UsageError(f"Invalid types list '{text}'. Valid types are: Consumer, Classic, Share")
    return [t for t in types if t is not None]


def parse_states(text: str) -> list[str]:
    """``"stable,Empty"`` -> Kafka's state names; IllegalArgument-style CommandError for an unknown one."""
    by_lower = {s.lower(): s for s in CONSUMER_GROUP_STATES}
    states = [by_lower.get(s.strip().lower()) for s in text.split(",")]
    if None in states:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(CONSUMER_GROUP_STATES)}")
    return [s for s in states if s is not None]


def reset_offsets(admin: Admin, args, out) -> dict[tuple[str, int], int]:
    """Reset ``args.group``'s offsets per the scenario; returns the new offsets (executed with ``--execute``)."""
    conn = admin.coordinator(args.group)
    try:
        g = admin.describe(conn, args.group)
        if g["group_state"] not in ("Empty", "Dead"):
            raise CommandError(
                f"Assignments can only be reset if the group '{args.group}' is inactive, but the "
                f"current state is {g['group_state']}."
            )
        committed = admin.committed(conn, args.group)
        if args.from_file is not None:
            tps = sorted(args.reset_plan.get(args.group, {}))
        elif args.all_topics:
            tps = sorted(committed)
        else:
            tps = []
            for spec in args.topic:
                topic, _, parts = spec.partition(":")
                tps += (
                    [(topic, int(p)) for p in parts.split(",")]
                    if parts
                    else [(topic, p) for p in admin.partitions(topic)]
                )
        new = prepare_offsets_to_reset(admin, args, tps, committed, out)
        if args.execute:
            r = conn.request(
                ApiKeys.OFFSET_COMMIT,
                8,
                {
                    "group_id": args.group,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": t,
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "committed_offset": o,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                                for (t2, p), o in new.items()
                                if t2 == t
                            ],
                        }
                        for t in sorted({t for t, _ in new})
                    ],
                },
            )
            for t in r["topics"]:
                for p in t["partitions"]:
                    if p["error_code"] != errors.NONE:
                        raise CommandError(
                            f"Error committing offsets for {t['name']}-{p['partition_index']}: "
                            f"{errors.name_of(p['error_code'])}"
                        )
    finally:
        conn.close()
    return new


def parse_reset_plan(text: str, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Kafka's parseResetPlan: ``topic,partition,offset`` lines for a single ``--group``, else
    ``group,topic,partition,offset`` lines. Raises ValueError for a malformed line."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    plan: dict[str, dict[tuple[str, int], int]] = {}
    single = len(groups) == 1 and bool(lines) and len(lines[0].split(",")) == 3
    for line in lines:
        fields = line.split(",")
        try:
            if single:
                group, (topic, partition, offset) = groups[0], fields
            else:
                group, topic, partition, offset = fields
            plan.setdefault(group, {})[(topic, int(partition))] = int(offset)
        except ValueError:
            raise ValueError(f"Invalid line in the reset plan: {line!r}") from None
    return plan


def export_offsets_to_csv(results: dict[str, dict[tuple[str, int], int]], single_group: bool) -> str:
    """Kafka's exportOffsetsToCsv: ``topic,partition,offset`` lines for one group, else with the group first."""
    return "".join(
        (f"{t},{p},{o}\n" if single_group else f"{group},{t},{p},{o}\n")
        for group, new in results.items()
        for (t, p), o in sorted(new.items())
    )


def print_offsets_to_reset(group: str, new: dict[tuple[str, int], int], out) -> None:
    """Kafka's printOffsetsToReset: each line led by a newline, fixed-width columns, a newline at the end."""
    fmt = "\n%-30s %-30s %-10s %-15s"
    text = fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") if new else ""
    text += "".join(fmt % (group, t, p, o) for (t, p), o in sorted(new.items()))
    print(text, file=out)


def prepare_offsets_to_reset(admin: Admin, args, tps, committed: dict[tuple[str, int], int], out) -> dict:
    """Kafka's prepareOffsetsToReset: the new offset of each of ``tps`` for the scenario chosen."""
    if args.to_earliest:
        return admin.list_offsets(tps, -2)
    if args.to_latest:
        return admin.list_offsets(tps, -1)
    if args.to_offset is not None:
        return check_offsets_range(admin, {tp: args.to_offset for tp in tps})
    if args.shift_by is not None:
        for tp in tps:
            if tp not in committed:
                raise ValueError(
                    f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current committed offset"
                )
        return check_offsets_range(admin, {tp: committed[tp] + args.shift_by for tp in tps})
    if args.from_file is not None:
        return check_offsets_range(admin, {tp: args.reset_plan[args.group][tp] for tp in tps})
    if args.to_datetime is not None or args.by_duration is not None:
        if args.to_datetime is not None:
            timestamp = get_date_time(args.to_datetime)
        else:
            timestamp = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        found = admin.list_offsets(tps, timestamp)
        missing = [tp for tp in tps if found.get(tp, -1) == -1]
        for t, p in missing:
            print(f"\nWarn: Partition {p} from topic {t} is empty. Falling back to latest known offset.", file=out)
        found.update(admin.list_offsets(missing, -1))
        return found
    # --to-current: the committed offset, or the log end where none is committed
    latest = admin.list_offsets([tp for tp in tps if tp not in committed], -1)
    return {tp: committed[tp] if tp in committed else latest[tp] for tp in tps}


def check_offsets_range(admin: Admin, requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Kafka's checkOffsetsRange: offsets past the log end go to the log end, before the log start to the start."""
    earliest, latest = admin.list_offsets(list(requested), -2), admin.list_offsets(list(requested), -1)
    out = {}
    for tp, offset in requested.items():
        if offset > latest[tp]:
            log.warning(
                "New offset (%d) is higher than latest offset for topic partition %s-%d. Value will be set to %d",
                offset,
                tp[0],
                tp[1],
                latest[tp],
            )
            offset = latest[tp]
        elif offset < earliest[tp]:
            log.warning(
                "New offset (%d) is lower than earliest offset for topic partition %s-%d. Value will be set to %d",
                offset,
                tp[0],
                tp[1],
                earliest[tp],
            )
            offset = earliest[tp]
        out[tp] = offset
    return out


_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?")
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE
)


def get_date_time(text: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-dd'T'HH:mm:ss.SSS`` with an optional zone (``Z``, ``+08``, ``+0800``,
    ``+08:00``; UTC when none) to epoch milliseconds."""
    m = _DATE_TIME.fullmatch(text)
    if "T" not in text:
        raise ValueError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    if m is None:
        raise ValueError(f'Unparseable date: "{text}"')
    zone = m.group(8) or "Z"
    if zone == "Z":
        tz = datetime.UTC
    else:
        digits = zone[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + int(digits[2:] or 0)
        tz = datetime.timezone(datetime.timedelta(minutes=-minutes if zone[0] == "-" else minutes))
    try:
        y, mo, d, h, mi, sec, ms = (int(m.group(i)) for i in range(1, 8))
        when = datetime.datetime(y, mo, d, h, mi, sec, ms * 1000, tzinfo=tz)
    except ValueError:
        raise ValueError(f'Unparseable date: "{text}"') from None
    return int(when.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """Java's Duration.parse (``PnDTnHnMn.nS``, each part signed, a leading sign negating all) in milliseconds."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = int(((m.group(7) or "") + "000")[:3])
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000
    ms += -fraction if m.group(6) and m.group(6).startswith("-") else fraction
    return -ms if m.group(1) == "-" else ms


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-consumer-groups",
        description="This tool helps to list all consumer groups, describe a consumer group, "
        "delete consumer group info, or reset consumer group offsets.",
    )
    p.add_argument("--bootstrap-server", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    for a in ("list", "describe", "delete", "reset-offsets"):
        action.add_argument(f"--{a}", action="store_true")
    p.add_argument("--group", action="append")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--members", action="store_true")
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        help="With --describe: the group's state; with --list: the groups' states, only those given if a list follows.",
    )
    p.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        help="When specified with '--list', it displays the types of all the groups. It can also be used to list "
        "groups with specific types.",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="Provide additional information, if any, when describing the group.",
    )
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--all-topics", action="store_true")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    target.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    target.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    target.add_argument(
        "--shift-by",
        type=int,
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
    )
    target.add_argument(
        "--to-datetime", help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'"
    )
    target.add_argument(
        "--by-duration", help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'"
    )
    target.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    target.add_argument("--from-file", help="Reset offsets to values defined in CSV file.")
    p.add_argument(
        "--export",
        action="store_true",
        help="Export operation execution to a CSV file. Supported operations: reset-offsets.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="Only show results without executing changes on Consumer Groups. Supported operations: reset-offsets.",
    )
    mode.add_argument("--execute", action="store_true", help="Execute operation. Supported operations: reset-offsets.")
    add_version_option(p)
    return p


def _check_args(args) -> None:
    """Kafka's ConsumerGroupCommandOptions.checkArgs, for the options this tool has."""
    if args.all_groups and args.group:
        raise UsageError('Option "[all-groups]" can\'t be used with option "[group]"')
    if args.all_groups and not (args.describe or args.delete or args.reset_offsets):
        raise UsageError('Option "[all-groups]" can\'t be used with option "[list]"')
    if (args.describe or args.delete or args.reset_offsets) and not (args.group or args.all_groups):
        raise UsageError("Option [describe|delete|reset-offsets] takes one of these options: [all-groups], [group]")
    if args.state is not None and not (args.list or args.describe):
        raise UsageError('Option "[state]" can only be used with options "[list]" or "[describe]"')
    if args.state and args.describe:
        raise UsageError("Option [describe] does not take a value for [state]")
    if args.members and args.state is not None:
        raise UsageError('Option "[members]" can\'t be used with option "[state]"')
    if args.list and args.state:
        parse_states(args.state)
    if args.type is not None and not args.list:
        raise UsageError("Option(s) [type] are unavailable given other options on the command line")
    if args.verbose and not args.describe:
        raise UsageError("Option(s) [verbose] are unavailable given other options on the command line")
    if args.type:
        parse_types(args.type)


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    try:
        _check_args(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 1
    admin = None
    try:
        admin = Admin(args.bootstrap_server)
        if args.all_groups:
            args.group = [g["group_id"] for g in admin.list_groups()]
        if args.list:
            if args.state is not None or args.type is not None:
                list_with_state(
                    admin,
                    parse_states(args.state) if args.state else [],
                    out,
                    types=None if args.type is None else parse_types(args.type) if args.type else [],
                    state=args.state is not None,
                )
            else:
                for g in admin.list_groups():
                    print(g["group_id"], file=out)
        elif args.describe:
            for group in args.group:
                if args.state is not None:
                    describe_state(admin, group, out, args.verbose)
                else:
                    describe(admin, group, args.members, out, args.verbose)
        elif args.delete:
            delete_results: dict[str, int] = {}  # group -> DeleteGroups error code
            for group in args.group:
                conn = admin.coordinator(group)
                try:
                    (r,) = conn.request(ApiKeys.DELETE_GROUPS, 2, {"groups_names": [group]})["results"]
                finally:
                    conn.close()
                delete_results[group] = r["error_code"]
            ok = [g for g, c in delete_results.items() if c == errors.NONE]
            if ok:
                print(
                    f"Deletion of requested consumer groups ({', '.join(repr(g) for g in ok)}) was successful.",
                    file=out,
                )
            for failed, c in delete_results.items():
                if c != errors.NONE:
                    print(
                        f"Deletion of some consumer groups failed:\n* Group '{failed}' could not be deleted due to: "
                        f"{errors.for_code(c).__name__}: {errors.for_code(c).default_message}",
                        file=out,
                    )
            if len(ok) != len(delete_results):
                return 1
        else:
            scenarios = (args.to_offset, args.shift_by, args.to_datetime, args.by_duration, args.from_file)
            if not (args.to_earliest or args.to_latest or args.to_current or any(a is not None for a in scenarios)):
                print(
                    "Option [reset-offsets] takes one of [to-earliest], [to-latest], [to-offset], [shift-by], "
                    "[to-datetime], [by-duration], [to-current], [from-file]",
                    file=sys.stderr,
                )
                return 1
            if not args.topic and not args.all_topics and args.from_file is None:
                print("Option [reset-offsets] takes one of these options: [all-topics], [topic]", file=sys.stderr)
                return 1
            if not args.dry_run and not args.execute:
                print(
                    "WARN: No action will be performed as the --execute option is missing.In a future major release, "
                    "the default behavior of this command will be to prompt the user before executing the reset rather "
                    "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
                    "command and want to keep the current default behavior without prompting.",
                    file=sys.stderr,
                )
            groups = list(args.group)
            if args.from_file is not None:
                with open(args.from_file, encoding="utf-8") as f:
                    args.reset_plan = parse_reset_plan(f.read(), groups)
            results: dict[str, dict[tuple[str, int], int]] = {}
            for group in groups:
                args.group = group
                results[group] = reset_offsets(admin, args, out)
                if not args.export:
                    print_offsets_to_reset(group, results[group], out)
            if args.export:
                print(export_offsets_to_csv(results, len(groups) == 1), file=out)
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
