"""Broker lifecycle on the QuorumController (Kafka's BrokerHeartbeat / fencing / controlled shutdown /
UnregisterBroker) over the single-voter KafkaRaftClient, with a MockTime driving broker sessions.

Sessions expire only when the MockTime moves; ``Node.tick(ms)`` advances it in steps shorter than the
controller's stall threshold (a longer jump is a stall of the controller itself, credited to every
session), each followed by a controller read as a barrier: the read wakes the event thread, which first
runs the due stale-broker check, and completes once everything written before it is committed.
``Node.jump(ms)`` moves the clock in one step, as a stopped controller process sees it."""

from __future__ import annotations

import random
import threading
import uuid

import pytest

from pykbroker.metadata.broker_heartbeat_manager import BrokerControlState, BrokerHeartbeatManager
from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.event_queue import EventQueue
from pykbroker.metadata.features import supported_features_request
from pykbroker.metadata.image import MetadataImage
from pykbroker.metadata.metadata_loader import MetadataLoader
from pykbroker.metadata.publisher import MetadataPublisher
from pykbroker.metadata.quorum_controller import QuorumController
from pykbroker.metadata.records import NO_LEADER, MetadataRecordSerde
from pykbroker.protocol import errors, response_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.codec import encode
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver
from pykbroker.raft.quorum_state_store import FileQuorumStateStore
from pykbroker.raft.raft_client import RaftClientListener
from pykbroker.raft.replicated_log import MemoryReplicatedLog
from pykbroker.server.metadata_cache import MetadataCache
from pykbroker.utils.time import MockTime
from tests.helpers.wait import wait_until

TIMEOUT = 5
SESSION_MS = 9000


class LatestImage(MetadataPublisher):
    def __init__(self):
        self.image: MetadataImage | None = None

    def on_metadata_update(self, delta, new_image):
        self.image = new_image


class RecordNames(RaftClientListener):
    def __init__(self):
        self.names: list[str] = []

    def handle_commit(self, batch):
        self.names.extend(r.name for r in batch.records)


class Node:
    def __init__(self, tmp_path, unfence_on_register=False):
        self.time = MockTime(current_ms=1_000_000, current_ns=1_000_000_000_000)
        self.raft = KafkaRaftClient(
            1,
            [1],
            MemoryReplicatedLog(),
            FileQuorumStateStore(str(tmp_path)),
            MetadataRecordSerde(),
            append_linger_ms=1,
        )
        self.loader = MetadataLoader(1, "c", self.raft.high_watermark)
        self.publisher = LatestImage()
        self.loader.install_publishers([self.publisher]).result(TIMEOUT)
        self.raft.register(self.loader)
        self.records = RecordNames()
        self.raft.register(self.records)
        self.controller = QuorumController(
            1,
            self.raft,
            "c",
            time=self.time,
            random=random.Random(0),
            unfence_on_register=unfence_on_register,
            session_timeout_ms=SESSION_MS,
        )
        self.driver = KafkaRaftClientDriver(self.raft)
        self.driver.start()
        assert self.controller.wait_for_active(TIMEOUT)
        self.incarnations: dict[int, uuid.UUID] = {}
        self.epochs: dict[int, int] = {}

    def register(self, broker_id, incarnation=None, previous_broker_epoch=-1):
        incarnation = incarnation or uuid.uuid4()
        response = self.controller.register_broker(
            {
                "broker_id": broker_id,
                "cluster_id": "c",
                "incarnation_id": incarnation,
                "listeners": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092 + broker_id}],
                "features": supported_features_request(),
                "rack": None,
                "previous_broker_epoch": previous_broker_epoch,
            }
        ).result(TIMEOUT)
        if response["error_code"] == errors.NONE:
            self.incarnations[broker_id], self.epochs[broker_id] = incarnation, response["broker_epoch"]
        return response

    def heartbeat(self, broker_id, offset=None, epoch=None, want_fence=False, want_shut_down=False):
        return self.controller.process_broker_heartbeat(
            {
                "broker_id": broker_id,
                "broker_epoch": self.epochs.get(broker_id, -1) if epoch is None else epoch,
                "current_metadata_offset": self.raft.high_watermark() if offset is None else offset,
                "want_fence": want_fence,
                "want_shut_down": want_shut_down,
            }
        ).result(TIMEOUT)

    def live_broker(self, broker_id):
        self.register(broker_id)
        assert self.heartbeat(broker_id)["is_fenced"] is False

    def tick(self, ms):
        step = self.controller.stall_threshold_ms - 1
        while ms > 0:
            self.jump(min(ms, step))
            ms -= step

    def jump(self, ms):
        self.time.sleep(ms)
        self.controller.find_topic_ids([]).result(TIMEOUT)

    def fenced(self):
        return sorted(b for b, reg in self.controller.managers.cluster.brokers.items() if reg.fenced)

    def create(self, name, assignments=None, num_partitions=1, rf=1):
        topic = {"name": name, "num_partitions": num_partitions, "replication_factor": rf, "configs": []}
        if assignments is not None:
            topic.update(
                num_partitions=-1,
                replication_factor=-1,
                assignments=[{"partition_index": i, "broker_ids": a} for i, a in enumerate(assignments)],
            )
        return self.controller.create_topics({"topics": [topic]}).result(TIMEOUT)["topics"][0]

    def partition(self, name, p=0):
        repl = self.controller.managers.replication
        return repl.get_topic(name).parts[p]

    def wait_image(self, cond):
        return wait_until(
            lambda: self.publisher.image is not None and cond(self.publisher.image) and self.publisher.image,
            TIMEOUT,
            0.005,
            "image condition",
        )

    def stop(self):
        self.controller.close()
        self.driver.shutdown()
        self.loader.close()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.stop()


def test_register_fenced_then_heartbeat_unfences_once_caught_up(node):
    reg = node.register(1)
    assert reg["error_code"] == errors.NONE
    node.wait_image(lambda i: 1 in i.brokers and i.brokers[1].fenced)
    assert node.controller.fenced_broker_count == 1 and node.controller.active_broker_count == 0
    behind = node.heartbeat(1, offset=reg["broker_epoch"] - 1)
    assert behind == {"error_code": errors.NONE, "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    caught_up = node.heartbeat(1, offset=reg["broker_epoch"])
    assert caught_up["is_caught_up"] and not caught_up["is_fenced"] and not caught_up["should_shut_down"]
    image = node.wait_image(lambda i: not i.brokers[1].fenced)
    cache = MetadataCache(1, image)
    assert [b for b, _, _ in cache.alive_brokers("PLAINTEXT")] == [1]
    assert node.controller.fenced_broker_count == 0 and node.controller.active_broker_count == 1
    assert "BrokerRegistrationChangeRecord" in node.records.names
    # a further heartbeat changes nothing
    assert node.heartbeat(1)["is_fenced"] is False


def test_fenced_brokers_are_not_alive_in_the_metadata_cache(node):
    node.live_broker(1)
    node.register(2)
    image = node.wait_image(lambda i: 2 in i.brokers)
    cache = MetadataCache(1, image)
    assert [b for b, _, _ in cache.alive_brokers("PLAINTEXT")] == [1]
    assert cache.has_alive_broker(1) and not cache.has_alive_broker(2)


def test_heartbeat_errors(node):
    reg = node.register(1)
    stale = node.heartbeat(1, epoch=reg["broker_epoch"] + 1)
    assert stale["error_code"] == errors.STALE_BROKER_EPOCH and stale["is_fenced"] is True
    # the futures' dicts encode as BrokerHeartbeat responses as they are (the strict codec checks the keys)
    encode(response_schema(ApiKeys.BROKER_HEARTBEAT), 1, {"throttle_time_ms": 0, **stale})
    unknown = node.heartbeat(7, epoch=5)
    assert unknown["error_code"] == errors.STALE_BROKER_EPOCH  # Kafka: a heartbeat before registration
    assert node.controller.unregister_broker(7).result(TIMEOUT)["error_code"] == errors.BROKER_ID_NOT_REGISTERED


def test_session_expiry_fences_and_single_replica_loses_its_leader(node):
    node.live_broker(1)
    assert node.create("solo")["error_code"] == errors.NONE
    assert node.partition("solo").leader == 1
    node.tick(SESSION_MS - 1)
    assert not node.controller.managers.cluster.brokers[1].fenced  # still within its session
    node.tick(2)
    assert node.controller.managers.cluster.brokers[1].fenced
    part = node.partition("solo")
    assert (part.leader, part.isr, part.leader_epoch, part.partition_epoch) == (NO_LEADER, (1,), 1, 1)
    image = node.wait_image(lambda i: i.brokers[1].fenced)
    assert image.topics.get_topic("solo").partitions[0].leader == NO_LEADER
    # unfencing gives the leaderless partition back to its last ISR member
    assert node.heartbeat(1)["is_fenced"] is False
    part = node.partition("solo")
    assert (part.leader, part.isr, part.leader_epoch, part.partition_epoch) == (1, (1,), 2, 2)
    node.wait_image(lambda i: i.topics.get_topic("solo").partitions[0].leader == 1)


def test_session_expiry_moves_leadership_to_another_isr_member(node):
    for b in (1, 2, 3):
        node.live_broker(b)
    assert node.create("three", assignments=[[1, 2, 3]])["error_code"] == errors.NONE
    node.tick(5000)
    node.heartbeat(2)
    node.heartbeat(3)
    node.tick(5000)  # broker 1 silent for 10 s, brokers 2 and 3 for 5 s
    cluster = node.controller.managers.cluster
    assert [cluster.brokers[b].fenced for b in (1, 2, 3)] == [True, False, False]
    part = node.partition("three")
    assert (part.leader, part.isr, part.leader_epoch, part.replicas) == (2, (2, 3), 1, (1, 2, 3))
    # broker 1 comes back: unfenced, but not in the ISR, so leadership stays (no AlterPartition yet)
    assert node.heartbeat(1)["is_fenced"] is False
    assert node.partition("three").leader == 2
    # all stale at once: fenced one at a time, each paced fence_interval_ms after the one before
    interval = node.controller.fence_interval_ms
    for b in (2, 3):
        node.heartbeat(b)
    node.tick(SESSION_MS + 1)
    assert len(node.fenced()) == 1
    node.tick(interval - 1)
    assert len(node.fenced()) == 1
    node.tick(1)
    assert len(node.fenced()) == 2
    node.tick(interval)
    assert node.fenced() == [1, 2, 3]
    part = node.partition("three")
    assert part.leader == NO_LEADER and len(part.isr) == 1


def test_controlled_shutdown(node):
    node.live_broker(1)
    node.live_broker(2)
    assert node.create("cs", assignments=[[1, 2]])["error_code"] == errors.NONE
    assert node.create("cs1", assignments=[[1]])["error_code"] == errors.NONE
    first = node.heartbeat(1, want_shut_down=True)
    assert not first["is_fenced"] and not first["should_shut_down"]
    assert node.controller.managers.cluster.brokers[1].in_controlled_shutdown
    assert (node.partition("cs").leader, node.partition("cs").isr) == (2, (2,))
    assert (node.partition("cs1").leader, node.partition("cs1").isr) == (NO_LEADER, (1,))
    image = node.wait_image(lambda i: i.brokers[1].in_controlled_shutdown)
    assert not image.brokers[1].fenced
    # not yet: broker 2 (active) has not caught up with the shutdown's records
    assert node.heartbeat(1, want_shut_down=True)["should_shut_down"] is False
    node.heartbeat(2)
    done = node.heartbeat(1, want_shut_down=True)
    assert done["should_shut_down"] and done["is_fenced"]
    assert node.controller.managers.cluster.brokers[1].fenced
    # a broker in controlled shutdown is not used for new partitions
    created = node.create("after", num_partitions=4)
    assert created["error_code"] == errors.NONE
    assert all(p.replicas == (2,) for p in node.controller.managers.replication.get_topic("after").parts.values())


def test_shut_down_without_leaderships_is_immediate_and_want_fence_fences(node):
    node.live_broker(1)
    node.live_broker(2)
    done = node.heartbeat(1, want_shut_down=True)
    assert done["should_shut_down"] and done["is_fenced"]
    fenced = node.heartbeat(2, want_fence=True)
    assert fenced["is_fenced"] and not fenced["should_shut_down"]
    assert node.controller.fenced_broker_count == 2
    # a fenced broker asking to stay fenced stays fenced
    assert node.heartbeat(2, want_fence=True)["is_fenced"] is True


def test_placement_skips_fenced_brokers_and_replication_factor_message(node):
    node.live_broker(1)
    node.live_broker(2)
    node.register(3)  # fenced: never heartbeats
    assert node.create("spread", num_partitions=6)["error_code"] == errors.NONE
    leaders = {p.leader for p in node.controller.managers.replication.get_topic("spread").parts.values()}
    assert leaders == {1, 2}
    # as Kafka's StripedReplicaPlacer: a fenced broker may be a follower, never a leader nor in the ISR
    assert node.create("rf3", num_partitions=3, rf=3)["error_code"] == errors.NONE
    for p in node.controller.managers.replication.get_topic("rf3").parts.values():
        assert p.leader in (1, 2) and 3 not in p.isr and set(p.replicas) == {1, 2, 3}
    too_many = node.create("rf4", rf=4)
    assert too_many["error_code"] == errors.INVALID_REPLICATION_FACTOR
    assert too_many["error_message"] == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached "
        "because only 3 broker(s) are registered."
    )


def test_duplicate_and_amended_registrations(node):
    incarnation = uuid.uuid4()
    first = node.register(1, incarnation)
    node.heartbeat(1)
    dup = node.register(1, uuid.uuid4())
    assert dup["error_code"] == errors.DUPLICATE_BROKER_REGISTRATION
    assert dup["error_message"] == "Another broker is registered with that broker id."
    same = node.register(1, incarnation)  # idempotent: same epoch, still unfenced
    assert same == first
    assert not node.controller.managers.cluster.brokers[1].fenced
    node.tick(SESSION_MS + 1)  # session expires: the broker is fenced, a new incarnation is welcome
    again = node.register(1, uuid.uuid4())
    assert again["error_code"] == errors.NONE and again["broker_epoch"] > first["broker_epoch"]
    assert node.controller.managers.cluster.brokers[1].fenced
    # the old epoch is stale now
    assert node.heartbeat(1, epoch=first["broker_epoch"])["error_code"] == errors.STALE_BROKER_EPOCH


def test_unregister_broker(node):
    node.live_broker(1)
    node.live_broker(2)
    node.create("u", assignments=[[1, 2]])
    response = node.controller.unregister_broker(1).result(TIMEOUT)
    assert response == {"error_code": errors.NONE, "error_message": None}
    encode(response_schema(ApiKeys.UNREGISTER_BROKER), 0, {"throttle_time_ms": 0, **response})
    assert 1 not in node.controller.managers.cluster.brokers
    assert (node.partition("u").leader, node.partition("u").isr) == (2, (2,))
    node.wait_image(lambda i: 1 not in i.brokers)
    assert node.heartbeat(1, epoch=node.epochs[1])["error_code"] == errors.STALE_BROKER_EPOCH
    node.tick(SESSION_MS + 1)  # only broker 2 has a session left to expire
    assert node.controller.managers.cluster.brokers[2].fenced and node.partition("u").leader == NO_LEADER
    assert node.controller.managers.cluster.heartbeat_manager.brokers.keys() == {2}


def test_without_heartbeats_brokers_register_unfenced_and_are_never_fenced(tmp_path):
    n = Node(tmp_path, unfence_on_register=True)
    try:
        n.register(1)
        n.create("t")
        n.tick(SESSION_MS * 3)
        assert not n.controller.managers.cluster.brokers[1].fenced and n.partition("t").leader == 1
        assert n.register(1)["error_code"] == errors.NONE  # a restarted node re-registers at once
    finally:
        n.stop()


# -- the controller's own stalls and queued heartbeats (issue 23) ---------------------------------------


def test_a_stalled_controller_fences_no_broker_but_silence_after_it_still_counts(node):
    for b in (1, 2, 3):
        node.live_broker(b)
    assert node.create("three", assignments=[[1, 2, 3]])["error_code"] == errors.NONE
    # the controller process stopped for longer than a session (SIGSTOP): no heartbeat could be processed
    node.jump(SESSION_MS + 5000)
    assert node.fenced() == [] and node.partition("three").leader == 1
    # the stall reset every session to now: a broker silent for a whole session after it is fenced
    node.heartbeat(1)
    node.heartbeat(2)
    node.tick(SESSION_MS - 1)
    assert node.fenced() == []
    node.tick(2)
    assert node.fenced() == [3]


def test_a_short_stall_is_credited_to_the_sessions(node):
    node.live_broker(1)
    node.tick(4000)
    node.jump(6000)  # silent 10 s, but the controller did not run for 6 s of them
    assert node.fenced() == []
    node.tick(SESSION_MS - 4000 - 1)
    assert node.fenced() == []
    node.tick(2)
    assert node.fenced() == [1]


def test_a_received_heartbeat_waiting_in_the_queue_keeps_the_session(node):
    node.live_broker(1)
    node.live_broker(2)
    # a slow event holds the event thread; heartbeats received meanwhile are recorded as they arrive
    release = threading.Event()
    node.controller._queue.append(lambda: release.wait(TIMEOUT))
    node.time.sleep(1000)
    queued = node.controller.process_broker_heartbeat(
        {
            "broker_id": 1,
            "broker_epoch": node.epochs[1],
            "current_metadata_offset": node.raft.high_watermark(),
            "want_fence": False,
            "want_shut_down": False,
        }
    )
    tracker = node.controller._heartbeat_tracker
    assert tracker.last_received_ms(1, node.epochs[1]) == node.time.hi_res_milliseconds()
    assert tracker.last_received_ms(1, node.epochs[1] + 1) is None  # another registration's epoch
    release.set()
    assert queued.result(TIMEOUT)["is_fenced"] is False
    # a heartbeat received but not yet processed (as if still queued): broker 2's session runs from it
    node.tick(SESSION_MS - 2000)
    tracker.record(2, node.epochs[2], node.time.hi_res_milliseconds())
    tracker.record(1, node.epochs[1] + 7, node.time.hi_res_milliseconds())  # proves nothing for broker 1
    node.tick(2001)
    assert node.fenced() == [1]
    node.tick(SESSION_MS - 2002)
    assert node.fenced() == [1]
    node.tick(node.controller.fence_interval_ms + 2)
    assert node.fenced() == [1, 2]


# -- BrokerHeartbeatManager and ClusterControlManager activation --------------------------------------


def test_heartbeat_manager_sessions():
    time = MockTime(current_ns=0)
    hbm = BrokerHeartbeatManager(time, 100)
    assert hbm.next_check_time_ms() is None and hbm.find_one_stale_broker() is None
    hbm.register(1, fenced=False)
    time.sleep(10)
    hbm.register(2, fenced=False)
    hbm.register(3, fenced=True)
    assert hbm.next_check_time_ms() == 100
    time.sleep(91)
    assert hbm.find_one_stale_broker() == 1 and not hbm.has_valid_session(1) and hbm.has_valid_session(2)
    hbm.touch(1, False, 5)
    assert hbm.find_one_stale_broker() is None and hbm.next_check_time_ms() == 110
    hbm.fence(2)
    assert hbm.next_check_time_ms() == 201 and hbm.current_state(2) is BrokerControlState.FENCED
    hbm.maybe_update_controlled_shutdown_offset(1, 50)
    assert hbm.current_state(1) is BrokerControlState.CONTROLLED_SHUTDOWN
    assert hbm.calculate_next_broker_state(1, {"current_metadata_offset": 60}, 0, lambda: True)[1] is (
        BrokerControlState.CONTROLLED_SHUTDOWN
    )
    assert hbm.calculate_next_broker_state(1, {"current_metadata_offset": 60}, 0, lambda: False)[1] is (
        BrokerControlState.SHUTDOWN_NOW
    )
    with pytest.raises(RuntimeError):
        hbm.maybe_update_controlled_shutdown_offset(2, 1)


def test_activation_treats_registered_brokers_as_just_heartbeated():
    time = MockTime(current_ns=0)
    cluster = ClusterControlManager("c", unfence_on_register=False, time=time, session_timeout_ms=100)
    for b, fenced in ((1, False), (2, True)):
        for r in cluster.register_broker({"broker_id": b, "cluster_id": "c"}, b).records:
            r.data["fenced"] = fenced
            cluster.replay(r, b)
    time.sleep(1000)
    cluster.activate()
    hbm = cluster.heartbeat_manager
    assert hbm is not None and hbm.has_valid_session(1) and not hbm.has_valid_session(2)
    assert hbm.next_check_time_ms() == 1100 and cluster.register_broker_record_offsets == {1: 1, 2: 2}
    cluster.deactivate()
    assert cluster.heartbeat_manager is None


def test_heartbeat_manager_stall_credit_and_received_contacts():
    time = MockTime(current_ns=0)
    hbm = BrokerHeartbeatManager(time, 100)
    hbm.register(1, fenced=False)
    time.sleep(30)
    hbm.register(2, fenced=False)
    time.sleep(50)  # now 80: contacts 0 and 30
    hbm.credit_stall(40)
    assert [hbm.brokers[b].last_contact_ms for b in (1, 2)] == [40, 70]
    hbm.credit_stall(20)
    assert [hbm.brokers[b].last_contact_ms for b in (1, 2)] == [60, 80]  # never past now
    time.sleep(100)  # now 180
    assert hbm.find_one_stale_broker() == 1
    hbm.credit_stall(100)  # a whole session: every session starts again now
    assert [hbm.brokers[b].last_contact_ms for b in (1, 2)] == [180, 180] and hbm.find_one_stale_broker() is None
    time.sleep(101)  # now 281
    hbm.touch(2, False, 0)
    assert hbm.find_one_stale_broker() == 1
    assert hbm.note_contact(1, 200) and hbm.find_one_stale_broker() is None
    assert hbm.next_check_time_ms() == 300  # broker 1 is the oldest again, from its received heartbeat
    assert not hbm.note_contact(1, 150) and not hbm.note_contact(7, 300)  # older than known; unknown
    hbm.fence(1)
    assert not hbm.note_contact(1, 290)  # a fenced broker has no session to keep


# -- EventQueue deferred events -----------------------------------------------------------------------


def test_event_queue_deferred_events_follow_the_injected_time():
    time = MockTime(current_ns=0)
    queue = EventQueue("deferred-test", time)
    ran: list[str] = []
    try:
        queue.schedule_deferred("a", 100, lambda: ran.append("a"))
        queue.schedule_deferred("b", 50, lambda: ran.append("b"))
        queue.schedule_deferred("b", 200, lambda: ran.append("b2"))  # replaces "b"
        queue.schedule_deferred("c", 10, lambda: ran.append("c"))
        queue.cancel_deferred("c")
        done = threading.Event()
        queue.append(done.set)
        assert done.wait(TIMEOUT) and ran == []
        time.sleep(150)
        done.clear()
        queue.append(lambda: (ran.append("event"), done.set()))
        assert done.wait(TIMEOUT) and ran == ["a", "event"]  # a due deferred event runs first
    finally:
        errors_seen: list[BaseException] = []
        queue.schedule_deferred("d", 10**9, lambda: None, errors_seen.append)
        queue.close()
    assert ran == ["a", "event"] and len(errors_seen) == 1


def test_event_queue_reports_its_own_stall_before_anything_runs():
    time = MockTime(current_ns=0)
    ran: list[object] = []
    queue = EventQueue("stall-test", time, on_stall=ran.append, stall_threshold_ms=100)
    try:
        done = threading.Event()
        queue.append(done.set)
        assert done.wait(TIMEOUT)
        time.sleep(99)
        done.clear()
        queue.append(lambda: (ran.append("event"), done.set()))
        assert done.wait(TIMEOUT) and ran == ["event"]  # 99 ms is no stall
        queue.schedule_deferred("due", time.hi_res_milliseconds() + 50, lambda: ran.append("deferred"))
        time.sleep(250)
        done.clear()
        queue.append(lambda: (ran.append("event"), done.set()))
        assert done.wait(TIMEOUT)
        assert ran == ["event", 250, "deferred", "event"]
    finally:
        queue.close()
    with pytest.raises(ValueError):
        EventQueue("bad", time, on_stall=ran.append)


def elr_topic(node):
    """Brokers 1-3 live, ``eligible.leader.replicas.version`` 1, topic ``elr`` (RF 3 on 1,2,3, min ISR 2);
    returns ``state()``: the partition's ``(leader, isr, elr, last_known_elr)``."""
    for b in (1, 2, 3):
        node.live_broker(b)
    update = {"feature": "eligible.leader.replicas.version", "max_version_level": 1, "upgrade_type": 1}
    assert node.controller.update_features({"feature_updates": [update]}).result(TIMEOUT)["error_code"] == errors.NONE
    topic = {
        "name": "elr",
        "num_partitions": -1,
        "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]}],
        "configs": [{"name": "min.insync.replicas", "value": "2"}],
    }
    assert node.controller.create_topics({"topics": [topic]}).result(TIMEOUT)["topics"][0]["error_code"] == 0

    def state():
        p = node.partition("elr")
        return p.leader, p.isr, p.elr, p.last_known_elr

    return state


def test_eligible_leader_replicas_keep_fenced_isr_members_electable(node):
    """KIP-966 with eligible.leader.replicas.version 1: the ISR members fenced below min.insync.replicas stay
    eligible (ELR), the ISR may become empty (the last leader kept as the last known ELR), and an ELR member
    coming back leads again cleanly; the image carries both lists."""
    state = elr_topic(node)

    assert node.heartbeat(1, want_fence=True)["is_fenced"]
    assert state() == (2, (2, 3), (), ())  # still at min.insync.replicas: no ELR
    assert node.heartbeat(2, want_fence=True)["is_fenced"]
    assert state() == (3, (3,), (2,), ())
    assert node.heartbeat(3, want_fence=True)["is_fenced"]
    assert state() == (NO_LEADER, (), (2, 3), (3,))
    image = node.wait_image(lambda i: i.topics.get_topic("elr").partitions[0].leader == NO_LEADER)
    assert image.topics.get_topic("elr").partitions[0].elr == (2, 3)
    # broker 1 (not eligible) comes back: no leader; broker 2 (eligible) comes back: it leads
    assert node.heartbeat(1)["is_fenced"] is False
    assert state() == (NO_LEADER, (), (2, 3), (3,))
    assert node.heartbeat(2)["is_fenced"] is False
    assert state() == (2, (2,), (3,), ())
    node.wait_image(lambda i: i.topics.get_topic("elr").partitions[0].leader == 2)


def test_a_new_incarnation_without_a_clean_shutdown_leaves_the_elr(node):
    """KIP-966's clean shutdown detection: a broker registering a new incarnation with a
    ``previous_broker_epoch`` other than its last registration's (no clean-shutdown marker: -1) leaves the ELR;
    one that shut down cleanly (its marker held that epoch) stays eligible and leads once unfenced."""
    state = elr_topic(node)
    for b in (1, 2, 3):
        assert node.heartbeat(b, want_fence=True)["is_fenced"]
    assert state() == (NO_LEADER, (), (2, 3), (3,))
    node.tick(SESSION_MS + 1)  # the sessions expire: new incarnations may register
    clean_epoch = node.epochs[2]
    assert node.register(3, previous_broker_epoch=-1)["error_code"] == errors.NONE
    assert state() == (NO_LEADER, (), (2,), (3,))
    assert node.register(2, previous_broker_epoch=clean_epoch)["error_code"] == errors.NONE
    assert state() == (NO_LEADER, (), (2,), (3,))
    assert node.heartbeat(2)["is_fenced"] is False
    assert state() == (2, (2,), (), ())
