"""Offline log directories on the controller (KIP-858): the replicas' directories (PartitionRegistration
``directories``, AssignReplicasToDirs) and a heartbeat's ``offline_log_dirs`` moving the leadership of the
partitions in a failed directory (Kafka's ReplicationControlManager.handleDirectoriesOffline)."""

from __future__ import annotations

import random
import uuid

from pykbroker.metadata import directory_id, partition_change_builder
from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.configuration_control_manager import ConfigurationControlManager
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import (
    BROKER_REGISTRATION_CHANGE_RECORD,
    PARTITION_CHANGE_RECORD,
    ApiMessageAndVersion,
    MetadataRecordSerde,
)
from pykbroker.metadata.replica_placer import StripedReplicaPlacer
from pykbroker.metadata.replication_control_manager import ReplicationControlManager
from pykbroker.protocol import errors

D1, D2, E1, E2 = (uuid.UUID(int=(i << 64) + 7) for i in range(1, 5))


class Ctx:
    def __init__(self, metadata_version: int | None = None):
        self.cluster = ClusterControlManager("cid", metadata_version=lambda: metadata_version)
        self.configs = ConfigurationControlManager()
        self.repl = ReplicationControlManager(self.cluster, self.configs, StripedReplicaPlacer(random.Random(0)))
        self.configs.topic_exists = self.repl.topic_exists
        for b, dirs in ((0, [D1, D2]), (1, [E1]), (2, [E2])):
            request = {"broker_id": b, "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092 + b}]}
            self.replay(self.cluster.register_broker({**request, "log_dirs": dirs}, 10 + b).records)
        self.cluster.activate()
        result = self.repl.create_topics(
            {
                "topics": [
                    {
                        "name": "t",
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [
                            {"partition_index": 0, "broker_ids": [0, 1, 2]},
                            {"partition_index": 1, "broker_ids": [0, 2, 1]},
                        ],
                    }
                ]
            }
        )
        self.replay(result.records)
        self.topic = self.repl.get_topic("t")

    def replay(self, records: list[ApiMessageAndVersion]) -> None:
        serde = MetadataRecordSerde()
        for r in records:
            r = serde.read(serde.write(r))  # the records must encode at their version
            for m in (self.cluster, self.configs, self.repl):
                m.replay(r)

    def assign(self, broker: int, epoch: int, dirs: dict[uuid.UUID, list[int]], topic_id=None) -> dict:
        topic_id = topic_id or self.topic.id
        request = {
            "broker_id": broker,
            "broker_epoch": epoch,
            "directories": [
                {"id": d, "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": p} for p in ps]}]}
                for d, ps in dirs.items()
            ],
        }
        result = self.repl.assign_replicas_to_dirs(request)
        self.replay(result.records)
        return result.response

    def heartbeat(self, broker: int, offline: list[uuid.UUID]) -> list[ApiMessageAndVersion]:
        request = {
            "broker_id": broker,
            "broker_epoch": 10 + broker,
            "current_metadata_offset": 1000,
            "want_fence": False,
            "want_shut_down": False,
            "offline_log_dirs": offline,
        }
        result = self.repl.process_broker_heartbeat(request, 0)
        assert result.response["error_code"] == errors.NONE
        self.replay(result.records)
        return result.records


def test_new_replicas_get_their_brokers_only_directory_or_unassigned():
    ctx = Ctx()
    p0 = ctx.topic.parts[0]
    assert p0.directories == (directory_id.UNASSIGNED, E1, E2)
    assert ctx.repl.directories_to_partitions[E1] == {(ctx.topic.id, 0), (ctx.topic.id, 1)}


def test_assign_replicas_to_dirs_sets_the_directory_of_the_brokers_replica():
    ctx = Ctx()
    response = ctx.assign(0, 10, {D1: [0], D2: [1]})
    assert response["error_code"] == errors.NONE
    assert [p["error_code"] for d in response["directories"] for p in d["topics"][0]["partitions"]] == [0, 0]
    assert ctx.topic.parts[0].directory(0) == D1 and ctx.topic.parts[1].directory(0) == D2
    assert ctx.topic.parts[0].directory(1) == E1  # the others keep theirs
    assert ctx.repl.directories_to_partitions[D1] == {(ctx.topic.id, 0)}
    unknown = ctx.assign(0, 10, {D1: [0]}, topic_id=uuid.uuid4())
    assert unknown["directories"][0]["topics"][0]["partitions"][0]["error_code"] == errors.UNKNOWN_TOPIC_ID
    missing = ctx.assign(0, 10, {D1: [7]})
    assert missing["directories"][0]["topics"][0]["partitions"][0]["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION
    try:
        ctx.assign(0, 99, {D1: [0]})
        raise AssertionError("a stale broker epoch was accepted")
    except errors.StaleBrokerEpochError:
        pass


def test_offline_directory_in_a_heartbeat_moves_the_leadership_of_its_partitions_only():
    ctx = Ctx()
    ctx.assign(0, 10, {D1: [0], D2: [1]})
    assert ctx.topic.parts[0].leader == 0 and ctx.topic.parts[1].leader == 0
    records = ctx.heartbeat(0, [D1])
    assert [r.name for r in records] == [PARTITION_CHANGE_RECORD, BROKER_REGISTRATION_CHANGE_RECORD]
    p0, p1 = ctx.topic.parts[0], ctx.topic.parts[1]
    assert p0.leader == 1 and p0.isr == (1, 2)  # moved to the next ISR member
    assert p1.leader == 0 and p1.isr == (0, 2, 1)  # its directory is still online
    assert ctx.cluster.brokers[0].log_dirs == [D2]
    assert not ctx.repl.leader_acceptor(p0)(0) and ctx.repl.leader_acceptor(p1)(0)
    assert ctx.heartbeat(0, [D1]) == []  # already offline: nothing more


def test_assignment_to_an_offline_directory_takes_the_replica_out_of_the_isr():
    ctx = Ctx()
    ctx.heartbeat(0, [D1])  # nothing assigned there yet: only the registration changes
    assert ctx.topic.parts[0].leader == 0
    ctx.assign(0, 10, {D1: [0]})
    assert ctx.topic.parts[0].directory(0) == D1
    assert ctx.topic.parts[0].leader == 1 and 0 not in ctx.topic.parts[0].isr


def test_before_metadata_version_3_7_iv2_there_are_no_directories():
    ctx = Ctx(metadata_version=16)
    assert ctx.topic.parts[0].directories == ()
    assert ctx.heartbeat(0, [D1]) == []
    assert ctx.topic.parts[0].leader == 0
    try:
        ctx.assign(0, 10, {D1: [0]})
        raise AssertionError("directory assignment accepted before 3.7-IV2")
    except errors.UnsupportedVersionError:
        pass


def test_a_reassignment_keeps_the_directories_of_the_replicas_that_stay():
    part = PartitionRegistration((0, 1, 2), (0, 1, 2), leader=0, directories=(D1, E1, E2))
    replicas, removing, adding = partition_change_builder.reassignment_replicas(part.replicas, [0, 1, 3])
    record = partition_change_builder.build(
        uuid.uuid4(),
        0,
        part,
        list(part.isr),
        lambda r: True,
        target_replicas=replicas,
        target_removing=removing,
        target_adding=adding,
        default_dir=lambda broker: D2 if broker == 3 else directory_id.UNASSIGNED,
    )
    assert record is not None and record.version >= 1
    assert record.data["replicas"] == [0, 1, 3, 2]
    assert record.data["directories"] == [D1, E1, D2, E2]
