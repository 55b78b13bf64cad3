"""AlterPartition on the controller: Kafka's validation order and errors, the records of an accepted
ISR change and the state answered (ReplicationControlManager.alterPartition)."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.metadata.alter_partition import alter_partition
from pykbroker.metadata.records import PARTITION_CHANGE_RECORD
from pykbroker.protocol import errors
from tests.unit.metadata.test_replication_control_manager import Ctx, t


@pytest.fixture
def ctx():
    c = Ctx(num_brokers=3)
    c.create(t("a", p=1, rf=3))
    return c


def state(ctx, topic="a", index=0):
    return ctx.repl.topics[ctx.repl.topics_by_name[topic]].parts[index]


def request(ctx, new_isr, broker=None, leader_epoch=None, partition_epoch=None, epochs=None, topic="a", index=0):
    part = state(ctx, topic, index)
    broker = part.leader if broker is None else broker
    return {
        "broker_id": broker,
        "broker_epoch": ctx.cluster.brokers[broker].epoch,
        "topics": [
            {
                "topic_id": ctx.repl.topics_by_name.get(topic),
                "partitions": [
                    {
                        "partition_index": index,
                        "leader_epoch": part.leader_epoch if leader_epoch is None else leader_epoch,
                        "new_isr_with_epochs": [
                            {"broker_id": b, "broker_epoch": (epochs or {}).get(b, -1)} for b in new_isr
                        ],
                        "leader_recovery_state": 0,
                        "partition_epoch": part.partition_epoch if partition_epoch is None else partition_epoch,
                    }
                ],
            }
        ],
    }


def answer(result):
    return result.response["topics"][0]["partitions"][0]


def test_shrink_writes_a_partition_change_and_answers_the_new_state(ctx):
    part = state(ctx)
    leader = part.leader
    result = alter_partition(ctx.repl, request(ctx, [leader]))
    assert [r.name for r in result.records] == [PARTITION_CHANGE_RECORD]
    assert result.records[0].data["isr"] == [leader]
    assert answer(result) == {
        "partition_index": 0,
        "error_code": errors.NONE,
        "leader_id": leader,
        "leader_epoch": part.leader_epoch,  # an ISR change alone keeps the leader epoch
        "isr": [leader],
        "leader_recovery_state": 0,
        "partition_epoch": part.partition_epoch + 1,
    }
    ctx.replay(result.records)
    assert state(ctx).isr == (leader,) and state(ctx).partition_epoch == part.partition_epoch + 1
    # Expanding back; an unchanged ISR writes nothing and answers the current state.
    full = list(part.replicas)
    grown = alter_partition(ctx.repl, request(ctx, [leader, *[b for b in full if b != leader]]))
    ctx.replay(grown.records)
    again = alter_partition(ctx.repl, request(ctx, list(state(ctx).isr)))
    assert again.records == [] and answer(again)["partition_epoch"] == state(ctx).partition_epoch


@pytest.mark.parametrize(
    "change, code",
    [
        ({"leader_epoch": +1}, errors.NOT_CONTROLLER),
        ({"partition_epoch": +1}, errors.NOT_CONTROLLER),
        ({"leader_epoch": -1}, errors.FENCED_LEADER_EPOCH),
        ({"partition_epoch": -1}, errors.INVALID_UPDATE_VERSION),
        ({"not_leader": True}, errors.INVALID_REQUEST),
        ({"isr": "without-leader"}, errors.INVALID_REQUEST),
        ({"isr": "outsider"}, errors.INVALID_REQUEST),
        ({"isr": "duplicate"}, errors.INVALID_REQUEST),
    ],
)
def test_validation_errors(ctx, change, code):
    ctx.replay(alter_partition(ctx.repl, request(ctx, [state(ctx).leader])).records)  # partition epoch 1
    part = state(ctx)
    leader, others = part.leader, [b for b in part.replicas if b != part.leader]
    isr = {
        None: [leader],
        "without-leader": others,
        "outsider": [leader, 7],
        "duplicate": [leader, leader],
    }[change.get("isr")]
    req = request(
        ctx,
        isr,
        broker=others[0] if change.get("not_leader") else None,
        leader_epoch=part.leader_epoch + change.get("leader_epoch", 0),
        partition_epoch=part.partition_epoch + change.get("partition_epoch", 0),
    )
    result = alter_partition(ctx.repl, req)
    assert answer(result)["error_code"] == code and result.records == []


def test_ineligible_replicas(ctx):
    part = state(ctx)
    leader, others = part.leader, [b for b in part.replicas if b != part.leader]
    ctx.replay(alter_partition(ctx.repl, request(ctx, [leader])).records)
    ctx.cluster.brokers[others[0]].fenced = True
    assert (
        answer(alter_partition(ctx.repl, request(ctx, [leader, others[0]])))["error_code"] == errors.INELIGIBLE_REPLICA
    )
    ctx.cluster.brokers[others[1]].in_controlled_shutdown = True
    assert (
        answer(alter_partition(ctx.repl, request(ctx, [leader, others[1]])))["error_code"] == errors.INELIGIBLE_REPLICA
    )
    ctx.cluster.brokers[others[1]].in_controlled_shutdown = False
    stale = request(ctx, [leader, others[1]], epochs={others[1]: 12345})
    assert answer(alter_partition(ctx.repl, stale))["error_code"] == errors.INELIGIBLE_REPLICA
    v1 = request(ctx, [leader, others[0]])  # v0-1: topic by name, OPERATION_NOT_ATTEMPTED
    v1["topics"][0]["topic_name"] = "a"
    v1["topics"][0]["partitions"][0]["new_isr"] = [leader, others[0]]
    assert answer(alter_partition(ctx.repl, v1, version=1))["error_code"] == errors.OPERATION_NOT_ATTEMPTED


def test_unknown_topic_partition_and_stale_broker_epoch(ctx):
    req = request(ctx, [state(ctx).leader])
    req["topics"][0]["topic_id"] = uuid.uuid4()
    assert answer(alter_partition(ctx.repl, req))["error_code"] == errors.UNKNOWN_TOPIC_ID
    req = request(ctx, [state(ctx).leader])
    req["topics"][0]["partitions"][0]["partition_index"] = 5
    assert answer(alter_partition(ctx.repl, req))["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
    req = request(ctx, [state(ctx).leader])
    req["broker_epoch"] = 999
    with pytest.raises(errors.StaleBrokerEpochError):
        alter_partition(ctx.repl, req)
