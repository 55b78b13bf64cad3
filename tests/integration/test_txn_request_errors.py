"""Transaction APIs answer bad input with Kafka's error codes, never UNKNOWN_SERVER_ERROR or a traceback
(hardening round 2, item 4).

* TxnOffsetCommit goes through Kafka's order (``GroupCoordinator.handleTxnCommitOffsets``): the group's
  partition, then the transaction's verification with its coordinator when the producer has no
  transaction open on that ``__consumer_offsets`` partition (KIP-890 part 1: an unknown producer id or
  transactional id is INVALID_PRODUCER_ID_MAPPING, a stale epoch INVALID_PRODUCER_EPOCH, a partition
  AddOffsetsToTxn did not add INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4), then the member checks.
* WriteTxnMarkers: UNKNOWN_TOPIC_OR_PARTITION for a partition this broker has no log of, per-partition
  codes for markers no batch can carry (negative producer id or epoch).
* A seeded fuzz over TxnOffsetCommit, WriteTxnMarkers, AddOffsetsToTxn, EndTxn and AddPartitionsToTxn
  with field values at their edges: every request is answered, no code is UNKNOWN_SERVER_ERROR, and the
  broker logs no traceback.
"""

from __future__ import annotations

import os
import random

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TID = "txn-errors"
SEED = int(os.environ.get("PYKBROKER_FUZZ_SEED", "20261123"))
FUZZ_REQUESTS = int(os.environ.get("PYKBROKER_TXN_FUZZ_REQUESTS", "600"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn-errors")).start()
    try:
        create_topic(b.bootstrap, "t", partitions=2)
        with BrokerConnection.to(b.bootstrap, timeout=10) as c:
            for key_type, key in ((0, "g"), (1, TID)):
                wait_until(
                    lambda key_type=key_type, key=key: (
                        c.request(ApiKeys.FIND_COORDINATOR, 1, {"key": key, "key_type": key_type})["error_code"]
                        == errors.NONE
                    ),
                    30,
                    message=f"coordinator for key type {key_type}",
                )
        yield b
    finally:
        b.stop()
    output = b.output()
    assert "Traceback" not in output, output[output.index("Traceback") - 2000 :][:6000]


def request(broker, api_key, version, body):
    with BrokerConnection.to(broker.bootstrap, timeout=10) as c:
        return c.request(api_key, version, body)


def init_producer(broker, tid: str) -> tuple[int, int]:
    def init():
        r = request(
            broker,
            ApiKeys.INIT_PRODUCER_ID,
            4,
            {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        return (r["producer_id"], r["producer_epoch"]) if r["error_code"] == errors.NONE else None

    return wait_until(init, 30, message="InitProducerId")


def txn_offset_commit(broker, version, producer_id, producer_epoch, tid=TID, group="g", **member) -> int:
    body = {
        "transactional_id": tid,
        "group_id": group,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "generation_id": member.get("generation_id", -1),
        "member_id": member.get("member_id", ""),
        "group_instance_id": member.get("group_instance_id"),
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    }
    (t,) = request(broker, ApiKeys.TXN_OFFSET_COMMIT, version, body)["topics"]
    (p,) = t["partitions"]
    return p["error_code"]


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_txn_offset_commit_with_an_unknown_producer_id(broker, version):
    """Kafka verifies the transaction with its coordinator: a producer id it does not know for the
    transactional id (any id, -1 included), or a transactional id it does not know, is
    INVALID_PRODUCER_ID_MAPPING; before, -1 raised a ValueError (UNKNOWN_SERVER_ERROR + traceback) and an
    unknown positive id was written as an open transaction no marker would ever close."""
    pid, epoch = init_producer(broker, TID)
    for producer_id, producer_epoch in ((pid + 1000, epoch), (-1, epoch), (-1, -1)):
        assert txn_offset_commit(broker, version, producer_id, producer_epoch) == errors.INVALID_PRODUCER_ID_MAPPING
    assert txn_offset_commit(broker, version, 7, 0, tid="never-initialized") == errors.INVALID_PRODUCER_ID_MAPPING
    # The right producer id with a stale or negative epoch: the coordinator's PRODUCER_FENCED, as
    # INVALID_PRODUCER_EPOCH (before, a negative epoch raised a ValueError).
    for producer_epoch in (epoch + 1, -1):
        assert txn_offset_commit(broker, version, pid, producer_epoch) == errors.INVALID_PRODUCER_EPOCH
    # An empty transactional id cannot be verified.
    assert txn_offset_commit(broker, version, pid, epoch, tid="") == errors.INVALID_REQUEST
    assert txn_offset_commit(broker, version, pid, epoch, group="") == errors.INVALID_GROUP_ID


def test_txn_offset_commit_needs_add_offsets_to_txn_then_checks_the_member(broker):
    tid = "txn-errors-flow"
    pid, epoch = init_producer(broker, tid)
    # AddOffsetsToTxn not sent: the group's partition is not in the transaction.
    assert txn_offset_commit(broker, 3, pid, epoch, tid=tid, group="flow") == errors.INVALID_TXN_STATE
    assert txn_offset_commit(broker, 4, pid, epoch, tid=tid, group="flow") == errors.TRANSACTION_ABORTABLE
    added = request(
        broker,
        ApiKeys.ADD_OFFSETS_TO_TXN,
        3,
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": "flow"},
    )
    assert added["error_code"] == errors.NONE
    # KIP-447 member checks once the transaction is verified (Kafka's validateOffsetCommit): an Empty group
    # takes generation -1 whatever the member; a generation names a member, which must exist.
    assert txn_offset_commit(broker, 3, pid, epoch, tid=tid, group="flow", member_id="m") == errors.NONE
    for member in ({"generation_id": 0}, {"generation_id": 0, "member_id": "m", "group_instance_id": "i"}):
        assert txn_offset_commit(broker, 3, pid, epoch, tid=tid, group="flow", **member) == errors.UNKNOWN_MEMBER_ID
    member_id, generation = join_static_member(broker, "flow", "i")
    checks = [
        ({"member_id": member_id, "generation_id": generation + 1}, errors.ILLEGAL_GENERATION),
        ({"member_id": "other", "generation_id": generation, "group_instance_id": "i"}, errors.FENCED_INSTANCE_ID),
        ({"member_id": "other", "generation_id": generation}, errors.UNKNOWN_MEMBER_ID),
        ({}, errors.NONE),  # no member named (TxnOffsetCommit before v3): accepted in any state
        ({"member_id": member_id, "generation_id": generation, "group_instance_id": "i"}, errors.NONE),
    ]
    for member, code in checks:
        assert txn_offset_commit(broker, 3, pid, epoch, tid=tid, group="flow", **member) == code, member
    ended = request(
        broker,
        ApiKeys.END_TXN,
        3,
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True},
    )
    assert ended["error_code"] == errors.NONE

    def committed():
        r = request(broker, ApiKeys.OFFSET_FETCH, 7, {"group_id": "flow", "topics": None, "require_stable": True})
        offsets = {
            (t["name"], p["partition_index"]): p["committed_offset"] for t in r["topics"] for p in t["partitions"]
        }
        return offsets == {("t", 0): 5}

    wait_until(committed, 15, message="the committed transaction's offset")
    # The transaction is over: a late commit with the same epoch needs the partition added again.
    assert txn_offset_commit(broker, 3, pid, epoch, tid=tid, group="flow") == errors.INVALID_TXN_STATE


def join_static_member(broker, group: str, instance_id: str) -> tuple[str, int]:
    """A Stable group of one static member (JoinGroup v5 completes at once, SyncGroup as leader)."""
    with BrokerConnection.to(broker.bootstrap, timeout=10) as c:
        joined = c.request(
            ApiKeys.JOIN_GROUP,
            5,
            {
                "group_id": group,
                "session_timeout_ms": 30000,
                "rebalance_timeout_ms": 30000,
                "member_id": "",
                "group_instance_id": instance_id,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        assert joined["error_code"] == errors.NONE, joined
        member_id, generation = joined["member_id"], joined["generation_id"]
        synced = c.request(
            ApiKeys.SYNC_GROUP,
            3,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": member_id,
                "group_instance_id": instance_id,
                "assignments": [{"member_id": member_id, "assignment": b""}],
            },
        )
        assert synced["error_code"] == errors.NONE, synced
    return member_id, generation


def write_marker(broker, producer_id, producer_epoch, topics) -> dict:
    r = request(
        broker,
        ApiKeys.WRITE_TXN_MARKERS,
        1,
        {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "coordinator_epoch": 0,
                    "topics": [{"name": n, "partition_indexes": ps} for n, ps in topics.items()],
                }
            ]
        },
    )
    (m,) = r["markers"]
    return {(t["name"], p["partition_index"]): p["error_code"] for t in m["topics"] for p in t["partitions"]}


def test_write_txn_markers_per_partition_errors(broker):
    topics = {"t": [1, 9], "no-such-topic": [0]}
    unknown = {("t", 9): errors.UNKNOWN_TOPIC_OR_PARTITION, ("no-such-topic", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert write_marker(broker, -1, 0, topics) == {("t", 1): errors.INVALID_PRODUCER_ID_MAPPING, **unknown}
    assert write_marker(broker, 4242, -1, topics) == {("t", 1): errors.INVALID_PRODUCER_EPOCH, **unknown}
    assert write_marker(broker, 4242, 3, topics) == {("t", 1): errors.NONE, **unknown}
    # An older epoch than the partition has for that producer now: refused by the producer state.
    assert write_marker(broker, 4242, 2, {"t": [1]}) == {("t", 1): errors.INVALID_PRODUCER_EPOCH}


# -- seeded fuzz over the transaction APIs ------------------------------------------------------------------
def _advertised(broker) -> dict[int, tuple[int, int]]:
    r = request(broker, ApiKeys.API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"})
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}


def _fuzz_request(rng: random.Random, versions, pid: int, epoch: int) -> tuple[int, int, dict]:
    pids = [pid, -1, 0, 4242, 2**63 - 1, -(2**63)]
    epochs = [epoch, -1, 0, 1, 2**15 - 1, -(2**15)]
    tids = [TID, "", "never-initialized", "x" * 300]
    groups = ["g", "", "other-group"]
    topic_names = ["t", "__consumer_offsets", "no-such-topic", ""]
    partitions = [0, 1, -1, 7, 2**31 - 1]

    def topics() -> list[tuple[str, list[int]]]:
        return [(rng.choice(topic_names), rng.sample(partitions, rng.randint(0, 3))) for _ in range(rng.randint(0, 2))]

    api = rng.choice(
        [
            ApiKeys.TXN_OFFSET_COMMIT,
            ApiKeys.WRITE_TXN_MARKERS,
            ApiKeys.ADD_OFFSETS_TO_TXN,
            ApiKeys.END_TXN,
            ApiKeys.ADD_PARTITIONS_TO_TXN,
        ]
    )
    version = rng.randint(*versions[api])
    if api == ApiKeys.TXN_OFFSET_COMMIT:
        body = {
            "transactional_id": rng.choice(tids),
            "group_id": rng.choice(groups),
            "producer_id": rng.choice(pids),
            "producer_epoch": rng.choice(epochs),
            "generation_id": rng.choice([-1, 0, 1, 2**31 - 1]),
            "member_id": rng.choice(["", "m"]),
            "group_instance_id": rng.choice([None, "i"]),
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": rng.choice([-1, 0, 5, 2**63 - 1]),
                            "committed_leader_epoch": rng.choice([-1, 0]),
                            "committed_metadata": rng.choice([None, "", "m" * 5000]),
                        }
                        for p in ps
                    ],
                }
                for name, ps in topics()
            ],
        }
    elif api == ApiKeys.WRITE_TXN_MARKERS:
        body = {
            "markers": [
                {
                    "producer_id": rng.choice(pids),
                    "producer_epoch": rng.choice(epochs),
                    "transaction_result": rng.random() < 0.5,
                    "coordinator_epoch": rng.choice([-1, 0, 2**31 - 1]),
                    "topics": [{"name": name, "partition_indexes": ps} for name, ps in topics()],
                }
                for _ in range(rng.randint(0, 2))
            ]
        }
    elif api == ApiKeys.ADD_OFFSETS_TO_TXN:
        body = {
            "transactional_id": rng.choice(tids),
            "producer_id": rng.choice(pids),
            "producer_epoch": rng.choice(epochs),
            "group_id": rng.choice(groups),
        }
    elif api == ApiKeys.END_TXN:
        body = {
            "transactional_id": rng.choice(tids),
            "producer_id": rng.choice(pids),
            "producer_epoch": rng.choice(epochs),
            "committed": rng.random() < 0.5,
        }
    elif version < 4:
        body = {
            "v3_and_below_transactional_id": rng.choice(tids),
            "v3_and_below_producer_id": rng.choice(pids),
            "v3_and_below_producer_epoch": rng.choice(epochs),
            "v3_and_below_topics": [{"name": name, "partitions": ps} for name, ps in topics()],
        }
    else:
        body = {
            "transactions": [
                {
                    "transactional_id": rng.choice(tids),
                    "producer_id": rng.choice(pids),
                    "producer_epoch": rng.choice(epochs),
                    "verify_only": rng.random() < 0.5,
                    "topics": [{"name": name, "partitions": ps} for name, ps in topics()],
                }
                for _ in range(rng.randint(0, 2))
            ]
        }
    return api, version, body


def _error_codes(value):
    if isinstance(value, dict):
        for key, v in value.items():
            if key.endswith("error_code"):
                yield v
            else:
                yield from _error_codes(v)
    elif isinstance(value, list):
        for v in value:
            yield from _error_codes(v)


def test_seeded_fuzz_of_the_transaction_apis_answers_every_request_with_kafka_codes(broker):
    pid, epoch = init_producer(broker, TID)
    versions = _advertised(broker)
    rng = random.Random(SEED)
    unknown_server_errors = []
    conn = BrokerConnection.to(broker.bootstrap, timeout=15)
    try:
        for i in range(FUZZ_REQUESTS):
            api, version, body = _fuzz_request(rng, versions, pid, epoch)
            response = conn.request(api, version, body)  # a closed connection raises: the test fails
            if errors.UNKNOWN_SERVER_ERROR in set(_error_codes(response)):
                unknown_server_errors.append((i, ApiKeys(api).name, version, body, response))
    finally:
        conn.close()
    assert unknown_server_errors == [], unknown_server_errors[:3]
    output = broker.output()
    assert "Traceback" not in output, output[output.index("Traceback") - 2000 :][:6000]
