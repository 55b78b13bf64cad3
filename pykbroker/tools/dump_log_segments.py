"""kafka-dump-log: print the contents of log files (Kafka's ``DumpLogSegments``).

    bin/kafka-dump-log --files f1,f2 [--print-data-log] [--deep-iteration] [--offsets-decoder]
        [--skip-record-metadata]

Per file ``Dumping <file>``, then by suffix: ``.log`` segments (``Log starting offset: N`` and one line per batch,
with ``--deep-iteration`` one ``| offset: ...`` line per record, ``--print-data-log`` adds ``key:``/``payload:``
as UTF-8 strings, ``--offsets-decoder`` decodes ``__consumer_offsets`` keys and values to Kafka's JSON form),
``.index`` (``offset: N position: P``), ``.timeindex`` (``timestamp: T offset: N``), ``.snapshot`` producer
state, ``.txnindex`` aborted transactions (``version: 0 producerId: P firstOffset: F lastOffset: L
lastStableOffset: S``); other suffixes are ignored with a note on stderr. Reads the files only; a broker
may keep running.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import sys

from pykbroker.coordinator.group import record_codec
from pykbroker.log.producer_state_snapshot import read_snapshot
from pykbroker.log.transaction_index import TransactionIndex
from pykbroker.record.compression import NAMES as COMPRESSION_NAMES
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, error_line

RECORD_INDENT = "|"
DELETE_HORIZON_FLAG = 0x40
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CONTROL = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None or value < 0 else f"OptionalLong[{value}]"


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


class _ProtocolReader:
    """Reads the non-flexible consumer protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _take(self, fmt: str) -> int:
        value = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ValueError("truncated string")
        self.pos += n
        return self.data[self.pos - n : self.pos].decode("utf-8")

    def bytes_b64(self) -> str | None:
        n = self.int32()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ValueError("truncated bytes")
        self.pos += n
        return base64.b64encode(self.data[self.pos - n : self.pos]).decode("ascii")

    def array(self, item) -> list:
        n = self.int32()
        if n < 0:
            raise ValueError("null array")
        return [item() for _ in range(n)]

    def topic_partitions(self) -> dict:
        return {"topic": self.string(), "partitions": self.array(self.int32)}


def _subscription_json(data: bytes) -> dict:
    r = _ProtocolReader(data)
    version = r.int16()
    out: dict = {"topics": r.array(r.string), "userData": r.bytes_b64()}
    if version >= 1:
        out["ownedPartitions"] = r.array(r.topic_partitions)
    if version >= 2:
        out["generationId"] = r.int32()
    if version >= 3:
        out["rackId"] = r.string()
    return out


def _assignment_json(data: bytes) -> dict:
    r = _ProtocolReader(data)
    r.int16()
    return {"assignedPartitions": r.array(r.topic_partitions), "userData": r.bytes_b64()}


def _member_protocol_field(data: bytes | None, decode, consumer: bool):
    """Kafka replaces a ``consumer`` group's subscription / assignment bytes with their JSON, else keeps them
    (base64) -- also when they do not decode."""
    if data is not None and consumer:
        try:
            return decode(data)
        except (ValueError, struct.error, UnicodeDecodeError):
            pass
    return _b64(data)


def parse_offsets_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str | None, str | None]:
    """Kafka's OffsetsMessageParser: ``{"type":"<key version>","data":{...}}`` and
    ``{"version":"<value version>","data":{...}}`` (``<DELETE>`` for a tombstone)."""
    if key is None:
        raise ValueError(
            f"Failed to decode message at offset {offset} using the specified decoder (message had a missing key)"
        )
    if len(key) >= 2 and struct.unpack_from(">h", key)[0] not in (0, 1, 2):
        return f"Unknown record type {struct.unpack_from('>h', key)[0]} at offset {offset}, skipping.", None
    try:
        return _parse_offsets_record(key, value)
    except Exception as e:  # noqa: BLE001 - Kafka prints the error in place of the record and goes on
        return f"Error at offset {offset}, skipping. {e}", None


def _parse_offsets_record(key: bytes, value: bytes | None) -> tuple[str | None, str | None]:
    key_version = struct.unpack_from(">h", key)[0]
    decoded = record_codec.decode_key(key)
    if decoded[0] == "offset":
        _, group, topic, partition = decoded
        key_text = _json({"type": str(key_version), "data": {"group": group, "topic": topic, "partition": partition}})
        if value is None:
            return key_text, "<DELETE>"
        version = struct.unpack_from(">h", value)[0]
        off, leader_epoch, metadata, commit_ts = record_codec.decode_offset_value(value)
        data: dict = {"offset": off}
        if version >= 3:
            data["leaderEpoch"] = leader_epoch
        data["metadata"] = metadata
        data["commitTimestamp"] = commit_ts
        return key_text, _json({"version": str(version), "data": data})
    key_text = _json({"type": str(key_version), "data": {"group": decoded[1]}})
    if value is None:
        return key_text, "<DELETE>"
    version = struct.unpack_from(">h", value)[0]
    g = record_codec.decode_group_value(value)
    group_data: dict = {"protocolType": g["protocol_type"], "generation": g["generation"], "protocol": g["protocol"]}
    group_data["leader"] = g["leader"]
    if version >= 2:
        group_data["currentStateTimestamp"] = g["state_timestamp"]
    members = []
    for m in g["members"]:
        member: dict = {"memberId": m["member_id"]}
        if version >= 3:
            member["groupInstanceId"] = m["group_instance_id"]
        member.update(clientId=m["client_id"], clientHost=m["client_host"])
        if version >= 1:
            member["rebalanceTimeout"] = m["rebalance_timeout"]
        member["sessionTimeout"] = m["session_timeout"]
        consumer = g["protocol_type"] == "consumer"
        member["subscription"] = _member_protocol_field(m["subscription"], _subscription_json, consumer)
        member["assignment"] = _member_protocol_field(m["assignment"], _assignment_json, consumer)
        members.append(member)
    group_data["members"] = members
    return key_text, _json({"version": str(version), "data": group_data})


def _string_record(key: bytes | None, value: bytes | None, offset: int) -> tuple[str | None, str | None]:
    return (
        None if key is None else key.decode("utf-8", "replace"),
        None if value is None else value.decode("utf-8", "replace"),
    )


def _sequence(base_sequence: int, offset_delta: int) -> int:
    if base_sequence < 0:
        return -1
    return (base_sequence + offset_delta) & 0x7FFFFFFF


def _control_text(key: bytes | None, value: bytes | None) -> str:
    type_id = _CONTROL.unpack_from(key)[1] if key is not None and len(key) >= 4 else -1
    name = CONTROL_TYPES.get(type_id)
    if name is not None and value is not None and len(value) >= 6:
        return f" endTxnMarker: {name} coordinatorEpoch: {_MARKER.unpack_from(value)[1]}"
    return f" controlType: {name or 'UNKNOWN'}({type_id})"


def dump_log(
    path: str, out, deep: bool, print_contents: bool, skip_metadata: bool, parser, gaps: dict[str, list]
) -> None:
    """Appends ``(previous, next)`` offset pairs that are not consecutive to ``gaps[absolute path]``."""
    start_offset = int(os.path.basename(path).split(".")[0])
    out.write(f"Log starting offset: {start_offset}\n")
    with open(path, "rb") as f:
        data = f.read()
    valid_bytes = 0
    last_offset = -1
    for position, batch in iter_batches(data):
        ts_type = TIMESTAMP_TYPES.get(batch.timestamp_type, "NoTimestampType")
        horizon = batch.base_timestamp if batch.attributes & DELETE_HORIZON_FLAG else None
        out.write(
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count}"
            f" baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence}"
            f" producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch}"
            f" partitionLeaderEpoch: {batch.partition_leader_epoch}"
            f" isTransactional: {str(batch.is_transactional).lower()} isControl: {str(batch.is_control_batch).lower()}"
            f" deleteHorizonMs: {_optional_long(horizon)} position: {position} {ts_type}: {batch.max_timestamp}"
            f" size: {batch.size_in_bytes} magic: {batch.magic}"
            f" compresscodec: {COMPRESSION_NAMES.get(batch.compression_type, 'none')} crc: {batch.checksum}"
            f" isvalid: {str(batch.is_valid()).lower()}\n"
        )
        if deep:
            base_seq = batch.base_sequence
            for record in batch.records(verify_crc=False):
                if record.offset != last_offset + 1:
                    gaps.setdefault(os.path.abspath(path), []).append((last_offset, record.offset))
                last_offset = record.offset
                line = ""
                if not skip_metadata:
                    key_size = -1 if record.key is None else len(record.key)
                    value_size = -1 if record.value is None else len(record.value)
                    header_keys = ",".join(h[0] for h in record.headers)
                    line += (
                        f"{RECORD_INDENT} offset: {record.offset} {ts_type}: {record.timestamp} keySize: {key_size}"
                        f" valueSize: {value_size} sequence: {_sequence(base_seq, record.offset - batch.base_offset)}"
                        f" headerKeys: [{header_keys}]"
                    )
                    if batch.is_control_batch:
                        line += _control_text(record.key, record.value)
                if print_contents and not batch.is_control_batch:
                    prefix = RECORD_INDENT + " " if skip_metadata else " "
                    key, payload = parser(record.key, record.value, record.offset)
                    if key is not None:
                        line += f"{prefix}key: {key}"
                        prefix = " "
                    if payload is not None:
                        line += f"{prefix}payload: {payload}"
                out.write(line + "\n")
        valid_bytes = position + batch.size_in_bytes
    if valid_bytes < len(data):
        out.write(f"Found {len(data) - valid_bytes} invalid bytes at the end of {os.path.basename(path)}\n")


def _base_offset(path: str) -> int:
    return int(os.path.basename(path).split(".")[0])


def dump_index(path: str, out) -> None:
    base = _base_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _OFFSET_ENTRY.size:
        out.write(f"{path} is empty.\n")
        return
    for i in range(len(data) // _OFFSET_ENTRY.size):
        relative, position = _OFFSET_ENTRY.unpack_from(data, i * _OFFSET_ENTRY.size)
        if relative == 0 and i > 0:
            return
        out.write(f"offset: {base + relative} position: {position}\n")


def dump_time_index(path: str, out) -> None:
    base = _base_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    for i in range(len(data) // _TIME_ENTRY.size):
        timestamp, relative = _TIME_ENTRY.unpack_from(data, i * _TIME_ENTRY.size)
        if relative == 0 and i > 0:
            return
        out.write(f"timestamp: {timestamp} offset: {base + relative}\n")


def dump_producer_snapshot(path: str, out) -> None:
    for entry in read_snapshot(path):
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
            f"lastTimestamp: {entry.last_timestamp}"
        )
        if entry.batch_metadata:
            m = entry.batch_metadata[0]
            line += (
                f" firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: {m.last_offset} "
                f"offsetDelta: {m.offset_delta} timestamp: {m.timestamp}"
            )
        out.write(line + "\n")


def dump_txn_index(path: str, out) -> None:
    """Kafka's dumpTxnIndex: one ``version: 0 producerId: P firstOffset: F lastOffset: L lastStableOffset: S``
    line per aborted transaction."""
    for txn in TransactionIndex(0, path).entries:
        out.write(f"{txn}\n")


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-dump-log", description="This tool helps to parse a log file and dump its contents to the console"
    )
    p.add_argument("--files", required=True, help="REQUIRED: The comma separated list of data and index log files")
    p.add_argument("--print-data-log", action="store_true", help="If set, printing the messages content")
    p.add_argument("--deep-iteration", action="store_true", help="If set, uses deep instead of shallow iteration")
    p.add_argument(
        "--offsets-decoder", action="store_true", help="If set, log data will be parsed as offset data from the "
        "__consumer_offsets topic."
    )  # fmt: skip
    p.add_argument("--skip-record-metadata", action="store_true", help="Whether to skip printing metadata for each "
                   "record.")  # fmt: skip
    add_version_option(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print_contents = args.print_data_log or args.offsets_decoder
    deep = args.deep_iteration or print_contents
    parser = parse_offsets_record if args.offsets_decoder else _string_record
    out = sys.stdout
    gaps: dict[str, list] = {}
    try:
        for path in args.files.split(","):
            out.write(f"Dumping {path}\n")
            name = os.path.basename(path)
            suffix = name[name.rfind(".") :] if "." in name else ""
            if suffix == ".log":
                dump_log(path, out, deep, print_contents, args.skip_record_metadata, parser, gaps)
            elif suffix == ".index":
                dump_index(path, out)
            elif suffix == ".timeindex":
                dump_time_index(path, out)
            elif suffix == ".snapshot":
                dump_producer_snapshot(path, out)
            elif suffix == ".txnindex":
                dump_txn_index(path, out)
            else:
                out.flush()
                print(f"Ignoring unknown file {path}", file=sys.stderr)
            out.flush()
    except Exception as e:  # noqa: BLE001 - Kafka prints the exception's message and exits 1
        out.flush()
        print(str(e) or error_line(e), file=sys.stderr)
        return 1
    for name, pairs in gaps.items():
        print(f"Non-consecutive offsets in {name}", file=sys.stderr)
        for before, after in pairs:
            print(f"  {before} is followed by {after}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
