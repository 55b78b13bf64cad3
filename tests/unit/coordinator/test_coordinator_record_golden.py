"""Golden bytes of the __consumer_offsets and __transaction_state records we write, and Kafka's older versions.

The hex literals were captured from the hand-written codecs before they became wrappers over the schema DSL
(``pykbroker.protocol.coordinator_records``): the DSL codecs must write the very same bytes. The ``kafka_*`` cases
are laid out by hand after Kafka's JSON specs (OffsetCommitValue v0-v4, GroupMetadataValue v0-v4): records a Kafka
broker (or an older one) wrote must still load.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.coordinator.group import record_codec as g
from pykbroker.coordinator.group.consumer import record_codec as c
from pykbroker.coordinator.group.consumer.member import ClassicMemberMetadata, MemberState
from pykbroker.coordinator.transaction import transaction_log as tl
from pykbroker.coordinator.transaction.transaction_metadata import TransactionState, TxnTransitMetadata

T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
T2 = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")


def _txn(state, tps, version, prev=-1, nxt=-1, ctv=0) -> bytes:
    transit = TxnTransitMetadata(1000, prev, 5, 4, 60000, state, frozenset(tps), 1700000000000, 1700000000500, nxt, ctv)
    return tl.value_bytes(transit, version)


MEMBERS = [
    ("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"\x00\x01sub", b"\x00\x01asg"),
    ("m-2", "inst-2", "client2", "/10.0.0.2", 60000, 45000, b"", b""),
]

WRITTEN = {
    "offset_key": lambda: g.offset_key("grp", "topic-a", 7),
    "offset_key_unicode": lambda: g.offset_key("grüppe", "t", 0),
    "offset_value": lambda: g.offset_value(42, 3, "meta", 1700000000000),
    "offset_value_no_epoch_no_meta": lambda: g.offset_value(0, -1, "", -1),
    "group_key": lambda: g.group_key("grp"),
    "group_value_empty": lambda: g.group_value("", 0, None, None, -1, []),
    "group_value": lambda: g.group_value("consumer", 5, "range", "m-1", 1700000000123, MEMBERS),
    "txn_key": lambda: tl.key_bytes("txn-1"),
    "txn_value_v0_ongoing": lambda: _txn(TransactionState.ONGOING, {("b", 1), ("a", 2), ("a", 0)}, 0),
    "txn_value_v0_empty": lambda: _txn(TransactionState.EMPTY, set(), 0),
    "txn_value_v1_no_tags": lambda: _txn(TransactionState.ONGOING, {("a", 0), ("b", 3)}, 1),
    "txn_value_v1_tags": lambda: _txn(TransactionState.PREPARE_COMMIT, {("a", 0)}, 1, prev=999, nxt=1001, ctv=2),
    "txn_value_v1_complete": lambda: _txn(TransactionState.COMPLETE_COMMIT, set(), 1, ctv=2),
    "cg_key_3": lambda: c.key(3, "cg"),
    "cg_key_4": lambda: c.key(4, "cg"),
    "cg_key_5": lambda: c.key(5, "cg", "mem"),
    "cg_key_6": lambda: c.key(6, "cg"),
    "cg_key_7": lambda: c.key(7, "cg", "mem"),
    "cg_key_8": lambda: c.key(8, "cg", "mem"),
    "cg_group_metadata": lambda: c.group_metadata_value(12),
    "cg_partition_metadata": lambda: c.partition_metadata_value({"b": (T2, 3), "a": (T1, 1)}),
    "cg_member_metadata": lambda: c.member_metadata_value(
        "inst", "rack", "cid", "/h", ("a", "b"), None, 30000, "uniform"
    ),
    "cg_member_metadata_nulls": lambda: c.member_metadata_value(None, None, "cid", "/h", (), "re.*", 45000, None),
    "cg_target_metadata": lambda: c.target_assignment_metadata_value(11),
    "cg_target_member": lambda: c.target_assignment_member_value({T2: {2, 0}, T1: {1}, uuid.UUID(int=5): set()}),
    "cg_current_assignment": lambda: c.current_assignment_value(
        12, 11, MemberState.UNREVOKED_PARTITIONS, {T1: {0, 1}}, {T2: {3}}
    ),
}

GOLDEN = {
    "offset_key": "000100036772700007746f7069632d6100000007",
    "offset_key_unicode": "000100076772c3bc70706500017400000000",
    "offset_value": "0003000000000000002a0000000300046d6574610000018bcfe56800",
    "offset_value_no_epoch_no_meta": "00030000000000000000ffffffff0000ffffffffffffffff",
    "group_key": "00020003677270",
    "group_value_empty": "0003000000000000ffffffffffffffffffffffff00000000",
    "group_value": (
        "00030008636f6e73756d657200000005000572616e676500036d2d310000018bcfe5687b0000000200036d2d31ffff000663"
        "6c69656e74000a2f3132372e302e302e31000075300000271000000005000173756200000005000161736700036d2d320006"
        "696e73742d320007636c69656e743200092f31302e302e302e320000ea600000afc80000000000000000"
    ),
    "txn_key": "0000000574786e2d31",
    "txn_value_v0_ongoing": (
        "000000000000000003e800050000ea6001000000020001610000000200000000000000020001620000000100000001000001"
        "8bcfe569f40000018bcfe56800"
    ),
    "txn_value_v0_empty": "000000000000000003e800050000ea6000000000000000018bcfe569f40000018bcfe56800",
    "txn_value_v1_no_tags": (
        "000100000000000003e800050000ea600103026102000000000002620200000003000000018bcfe569f40000018bcfe5680000"
    ),
    "txn_value_v1_tags": (
        "000100000000000003e800050000ea60020202610200000000000000018bcfe569f40000018bcfe568000300080000000000"
        "0003e7010800000000000003e902020002"
    ),
    "txn_value_v1_complete": "000100000000000003e800050000ea6004010000018bcfe569f40000018bcfe568000102020002",
    "cg_key_3": "000300026367",
    "cg_key_4": "000400026367",
    "cg_key_5": "00050002636700036d656d",
    "cg_key_6": "000600026367",
    "cg_key_7": "00070002636700036d656d",
    "cg_key_8": "00080002636700036d656d",
    "cg_group_metadata": "00000000000c00",
    "cg_partition_metadata": (
        "000003111111112222333344445555555555550261000000010100aaaaaaaabbbbccccddddeeeeeeeeeeee026200000003010000"
    ),
    "cg_member_metadata": "000005696e7374057261636b04636964032f680302610262000000753008756e69666f726d00",
    "cg_member_metadata_nulls": "0000000004636964032f68010572652e2a0000afc80000",
    "cg_target_metadata": "00000000000b00",
    "cg_target_member": (
        "00000311111111222233334444555555555555020000000100aaaaaaaabbbbccccddddeeeeeeeeeeee0300000000000000020000"
    ),
    "cg_current_assignment": (
        "00000000000c0000000b0102111111112222333344445555555555550300000000000000010002aaaaaaaabbbbccccddddee"
        "eeeeeeeeee02000000030000"
    ),
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_written_bytes_are_unchanged(name):
    assert WRITTEN[name]().hex() == GOLDEN[name]


def test_golden_bytes_decode_to_what_was_written():
    assert g.decode_key(bytes.fromhex(GOLDEN["offset_key_unicode"])) == ("offset", "grüppe", "t", 0)
    assert g.decode_offset_value(bytes.fromhex(GOLDEN["offset_value"])) == (42, 3, "meta", 1700000000000)
    decoded = g.decode_group_value(bytes.fromhex(GOLDEN["group_value"]))
    assert (decoded["protocol_type"], decoded["generation"], decoded["protocol"], decoded["leader"]) == (
        "consumer",
        5,
        "range",
        "m-1",
    )
    assert decoded["state_timestamp"] == 1700000000123
    members = [tuple(m[k] for k in _MEMBER_KEYS) for m in decoded["members"]]
    assert members == MEMBERS
    meta = tl.decode_value("t", bytes.fromhex(GOLDEN["txn_value_v1_tags"]))
    assert (meta.previous_producer_id, meta.next_producer_id, meta.client_transaction_version) == (999, 1001, 2)
    assert meta.topic_partitions == {("a", 0)}
    assert tl.decode_value("t", bytes.fromhex(GOLDEN["txn_value_v0_ongoing"])).topic_partitions == {
        ("a", 0),
        ("a", 2),
        ("b", 1),
    }
    assert c.decode_key(bytes.fromhex(GOLDEN["cg_key_8"])) == (8, "cg", "mem")
    assert c.decode_target_assignment_member_value(bytes.fromhex(GOLDEN["cg_target_member"])) == {
        T1: {1},
        T2: {0, 2},
    }


_MEMBER_KEYS = (
    "member_id",
    "group_instance_id",
    "client_id",
    "client_host",
    "rebalance_timeout",
    "session_timeout",
    "subscription",
    "assignment",
)


# -- Kafka's older (and newer) versions, laid out after its JSON specs -------------------------------------------
def _s(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text.encode())) + text.encode()


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _member(version: int) -> bytes:
    out = _s("m") + (_s("i") if version >= 3 else b"") + _s("cid") + _s("/h")
    out += struct.pack(">i", 300) if version >= 1 else b""
    return out + struct.pack(">i", 100) + _b(b"S") + _b(b"A")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_group_metadata_values_of_every_old_version_decode(version):
    value = struct.pack(">h", version) + _s("consumer") + struct.pack(">i", 4) + _s("range") + _s("m")
    value += struct.pack(">q", 77) if version >= 2 else b""
    value += struct.pack(">i", 1) + _member(version)
    decoded = g.decode_group_value(value)
    assert (decoded["protocol_type"], decoded["generation"], decoded["protocol"], decoded["leader"]) == (
        "consumer",
        4,
        "range",
        "m",
    )
    assert decoded["state_timestamp"] == (77 if version >= 2 else -1)
    (m,) = decoded["members"]
    assert m["group_instance_id"] == ("i" if version >= 3 else None)
    assert m["rebalance_timeout"] == (300 if version >= 1 else -1)
    assert (m["member_id"], m["client_id"], m["client_host"], m["session_timeout"]) == ("m", "cid", "/h", 100)
    assert (m["subscription"], m["assignment"]) == (b"S", b"A")


def test_kafka_group_metadata_value_v4_flexible_decodes():
    value = bytes.fromhex("0004") + b"\x09consumer" + struct.pack(">i", 4) + b"\x06range" + b"\x02m"
    value += struct.pack(">q", 77) + b"\x02"  # one member
    value += b"\x02m" + b"\x02i" + b"\x04cid" + b"\x03/h" + struct.pack(">ii", 300, 100) + b"\x02S\x02A" + b"\x00"
    value += b"\x00"
    decoded = g.decode_group_value(value)
    assert (decoded["protocol_type"], decoded["generation"], decoded["state_timestamp"]) == ("consumer", 4, 77)
    assert [m["group_instance_id"] for m in decoded["members"]] == ["i"]


def test_kafka_offset_commit_values_of_every_version_decode():
    """v0: offset, metadata, commit timestamp; v1 adds the expire timestamp; v2 drops it; v3 adds the leader epoch;
    v4 is v3 flexible."""
    v0 = struct.pack(">hq", 0, 5) + _s("md") + struct.pack(">q", 1000)
    v1 = struct.pack(">hq", 1, 5) + _s("md") + struct.pack(">qq", 1000, 2000)
    v2 = struct.pack(">hq", 2, 5) + _s("md") + struct.pack(">q", 1000)
    v3 = struct.pack(">hqi", 3, 5, 9) + _s("md") + struct.pack(">q", 1000)
    v4 = struct.pack(">hqi", 4, 5, 9) + b"\x03md" + struct.pack(">q", 1000) + b"\x00"
    assert [g.decode_offset_value(v) for v in (v0, v1, v2, v3, v4)] == [(5, -1, "md", 1000)] * 3 + [
        (5, 9, "md", 1000)
    ] * 2


def test_kafka_offset_commit_key_v0_decodes():
    assert g.decode_key(struct.pack(">h", 0) + _s("g") + _s("t") + struct.pack(">i", 3)) == ("offset", "g", "t", 3)


def test_truncated_or_unknown_records_raise_value_error():
    for bad in (
        lambda: g.decode_key(bytes.fromhex(GOLDEN["offset_key"])[:-1]),
        lambda: g.decode_key(b"\x00\x09\x00\x00"),
        lambda: g.decode_offset_value(bytes.fromhex(GOLDEN["offset_value"])[:-3]),
        lambda: g.decode_group_value(bytes.fromhex(GOLDEN["group_value"])[:20]),
        lambda: tl.decode_key(b"\x00\x01\x00\x01a"),
        lambda: tl.decode_value("t", bytes.fromhex(GOLDEN["txn_value_v1_tags"])[:30]),
        lambda: tl.decode_value("t", b"\x00\x07" + bytes.fromhex(GOLDEN["txn_value_v0_empty"])[2:]),
        lambda: c.decode_key(b"\x00\x05\x00\x02cg"),
        lambda: c.decode_current_assignment_value(bytes.fromhex(GOLDEN["cg_current_assignment"])[:-4]),
    ):
        with pytest.raises(ValueError):
            bad()


# -- round trips -------------------------------------------------------------------------------------------------
_text = st.text(max_size=12)
_maybe = st.none() | _text
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)


@given(
    _text,
    _int32,
    _maybe,
    _maybe,
    _int64,
    st.lists(st.tuples(_text, _maybe, _text, _text, _int32, _int32, st.binary(max_size=8), st.binary(max_size=8))),
)
def test_group_value_round_trip(protocol_type, generation, protocol, leader, ts, members):
    decoded = g.decode_group_value(g.group_value(protocol_type, generation, protocol, leader, ts, members))
    assert (decoded["protocol_type"], decoded["generation"], decoded["protocol"], decoded["leader"]) == (
        protocol_type,
        generation,
        protocol,
        leader,
    )
    assert decoded["state_timestamp"] == ts
    assert [tuple(m[k] for k in _MEMBER_KEYS) for m in decoded["members"]] == members


_states = st.sampled_from([s for s in TransactionState if s is not TransactionState.DEAD])


@given(
    _text,
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(0, 32767),
    _int32,
    _states,
    st.frozensets(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 2**31 - 1)), max_size=6),
    _int64,
    _int64,
    st.sampled_from([0, 1]),
    st.integers(0, 2),
)
def test_transaction_value_round_trip(tid, pid, prev, nxt, epoch, timeout, state, tps, start, update, version, ctv):
    transit = TxnTransitMetadata(pid, prev, epoch, epoch, timeout, state, tps, start, update, nxt, ctv)
    assert tl.decode_key(tl.key_bytes(tid)) == tid
    meta = tl.decode_value(tid, tl.value_bytes(transit, version))
    assert (meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms, meta.state) == (pid, epoch, timeout, state)
    assert (meta.topic_partitions, meta.txn_start_timestamp, meta.txn_last_update_timestamp) == (tps, start, update)
    if version == 1:
        assert (meta.previous_producer_id, meta.next_producer_id, meta.client_transaction_version) == (prev, nxt, ctv)


_tps = st.dictionaries(st.uuids(), st.sets(st.integers(0, 1000), min_size=1, max_size=4), max_size=4)


@given(_int32, _int32, st.sampled_from(list(MemberState)), _tps, _tps)
def test_consumer_group_assignment_round_trip(epoch, previous, state, assigned, revoking):
    value = c.current_assignment_value(epoch, previous, state, assigned, revoking)
    assert c.decode_current_assignment_value(value) == {
        "member_epoch": epoch,
        "previous_member_epoch": previous,
        "state": state,
        "assigned": assigned,
        "pending_revocation": revoking,
    }
    assert c.decode_target_assignment_member_value(c.target_assignment_member_value(assigned)) == assigned


_classic = st.none() | st.builds(
    ClassicMemberMetadata,
    _int32,
    st.lists(st.tuples(_text, st.binary(max_size=20)), max_size=3).map(tuple),
)


@given(_maybe, _maybe, _text, _text, st.lists(_text, max_size=4), _maybe, _int32, _maybe, _classic)
def test_consumer_group_member_metadata_round_trip(
    instance, rack, client, host, names, regex, timeout, assignor, classic
):
    value = c.member_metadata_value(instance, rack, client, host, tuple(names), regex, timeout, assignor, classic)
    assert c.decode_member_metadata_value(value) == {
        "classic": classic,
        "instance_id": instance,
        "rack_id": rack,
        "client_id": client,
        "client_host": host,
        "subscribed_topic_names": tuple(names),
        "subscribed_topic_regex": regex,
        "rebalance_timeout_ms": timeout,
        "server_assignor": assignor,
    }
