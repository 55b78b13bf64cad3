"""KafkaRaftClient with several voters, one RPC at a time: votes, elections, BeginQuorumEpoch, Fetch with
divergence and truncation, the high watermark rule, EndQuorumEpoch, observers, stale responses."""

from __future__ import annotations

import random

from pykbroker.protocol.errors import FENCED_LEADER_EPOCH, INCONSISTENT_VOTER_SET, NONE
from pykbroker.raft.control_records import LEADER_CHANGE, LeaderChangeMessage, parse_control_type
from pykbroker.raft.epoch_state import StateKind
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.quorum_state_store import ElectionState, MemoryQuorumStateStore
from pykbroker.raft.raft_messages import (
    BeginQuorumEpochRequestData,
    EndQuorumEpochRequestData,
    EpochEndOffset,
    FetchRequestData,
    FetchResponseData,
    LeaderIdAndEpoch,
    RaftRequest,
    RaftResponse,
    VoteRequestData,
    VoteResponseData,
)
from pykbroker.raft.replicated_log import LogRecord, MemoryReplicatedLog
from pykbroker.utils.time import MockTime

VOTERS = (1, 2, 3)


class StringSerde:
    def write(self, record: str) -> bytes:
        return record.encode()

    def read(self, value: bytes) -> str:
        return value.decode()


class Cluster:
    """Clients on one MockTime; ``exchange`` delivers every queued message until the network is quiet."""

    def __init__(self, ids=VOTERS, voters=VOTERS, logs=None, stores=None):
        self.time = MockTime(current_ns=0)
        self.logs = logs or {i: MemoryReplicatedLog() for i in ids}
        self.stores = stores or {i: MemoryQuorumStateStore() for i in ids}
        self.clients = {
            i: KafkaRaftClient(
                i,
                voters,
                self.logs[i],
                self.stores[i],
                StringSerde(),
                self.time,
                append_linger_ms=0,
                election_timeout_ms=1000,
                fetch_timeout_ms=2000,
                random=random.Random(i),
                request_timeout_ms=200,
                fetch_max_wait_ms=100,
            )
            for i in ids
        }
        for c in self.clients.values():
            c.initialize()
        self.delivered: list = []

    def poll(self, *ids):
        out = []
        for i in ids or self.clients:
            self.clients[i].poll_once()
            out += self.clients[i].drain_outbound()
        return out

    def exchange(self, messages, drop=lambda m: False, rounds=50):
        for _ in range(rounds):
            if not messages:
                return
            for m in messages:
                if not drop(m) and m.destination_id in self.clients:
                    self.delivered.append(m)
                    self.clients[m.destination_id].handle(m)
            messages = self.poll()

    def run(self, ms, step=50, drop=lambda m: False):
        """Let ``ms`` pass in steps, polling everyone and delivering everything each step."""
        for _ in range(ms // step):
            self.time.sleep(step)
            self.exchange(self.poll(), drop)

    def elect(self, node_id, drop=lambda m: False):
        """Let ``node_id``'s election timer run out first and the election complete."""
        self.clients[node_id].quorum.state.election_deadline_ms = 0
        self.exchange(self.poll(node_id), drop)
        assert self.clients[node_id].quorum.is_leader()


def vote(epoch, candidate, last_epoch=0, last_offset=0):
    return RaftRequest(7, candidate, 2, VoteRequestData(epoch, candidate, last_epoch, last_offset))


def test_vote_is_persisted_before_the_answer_and_granted_once_per_epoch():
    cluster = Cluster()
    voter = cluster.clients[2]
    voter.handle(vote(1, 1))
    voter.poll_once()
    assert cluster.stores[2].state == ElectionState(1, -1, 1, frozenset(VOTERS))  # durable first
    (answer,) = voter.drain_outbound()
    assert isinstance(answer, RaftResponse) and answer.destination_id == 1 and answer.correlation_id == 7
    assert answer.data == VoteResponseData(NONE, -1, 1, True)
    voter.handle(vote(1, 3))  # another candidate, same epoch
    voter.handle(vote(1, 1))  # the same candidate again: still granted
    voter.poll_once()
    assert [m.data.vote_granted for m in voter.drain_outbound()] == [False, True]
    voter.handle(vote(0, 3))  # an older epoch
    voter.poll_once()
    assert voter.drain_outbound()[0].data == VoteResponseData(FENCED_LEADER_EPOCH, -1, 1, False)


def test_vote_refused_to_a_candidate_with_a_less_up_to_date_log():
    cluster = Cluster()
    cluster.logs[2].append_as_leader([LogRecord(None, b"x")], 2)
    voter = cluster.clients[2]
    voter.handle(vote(3, 1, last_epoch=1, last_offset=5))  # older last epoch, longer log: refused
    voter.handle(vote(3, 3, last_epoch=2, last_offset=1))  # same epoch and end offset: granted
    voter.poll_once()
    assert [m.data.vote_granted for m in voter.drain_outbound()] == [False, True]
    assert cluster.stores[2].state.voted_id == 3


def test_election_timeout_vote_requests():
    cluster = Cluster()
    candidate = cluster.clients[1]
    assert candidate.poll_once() > 0 and candidate.drain_outbound() == []  # waits for its election timeout
    cluster.time.sleep(2001)
    pre_votes = cluster.poll(1)  # KIP-996: first a pre-vote, in the same epoch
    assert candidate.quorum.kind is StateKind.PROSPECTIVE and candidate.quorum.epoch == 0
    assert sorted(r.destination_id for r in pre_votes) == [2, 3]
    assert all(r.data == VoteRequestData(1, 1, 0, 0, voter_id=r.destination_id, pre_vote=True) for r in pre_votes)
    for r in pre_votes:
        cluster.clients[r.destination_id].handle(r)
    answers = [m for m in cluster.poll(2, 3) if isinstance(m, RaftResponse)]  # (they time out too)
    assert [a.data for a in answers] == [VoteResponseData(NONE, -1, 0, True)] * 2
    assert cluster.stores[2].state == cluster.stores[3].state == ElectionState(0, -1, -1, frozenset(VOTERS))
    for a in answers:
        candidate.handle(a)
    requests = cluster.poll(1)
    assert candidate.quorum.kind is StateKind.CANDIDATE and candidate.quorum.epoch == 1
    assert cluster.stores[1].state == ElectionState(1, -1, 1, frozenset(VOTERS))  # voted for itself, durably
    assert sorted(r.destination_id for r in requests) == [2, 3]
    assert all(r.data == VoteRequestData(1, 1, 0, 0, voter_id=r.destination_id) for r in requests)


def test_election_leader_change_record_and_begin_quorum_epoch():
    cluster = Cluster()
    cut_off_3 = lambda m: 3 in (m.source_id, m.destination_id)  # noqa: E731
    cluster.elect(1, drop=cut_off_3)  # only voter 2 answers: a majority of 3
    candidate = cluster.clients[1]
    assert candidate.leader_and_epoch == (1, 1)
    (batch,) = cluster.logs[1].read(0)
    assert batch.control and batch.epoch == 1 and parse_control_type(batch.records[0].key) == LEADER_CHANGE
    assert LeaderChangeMessage.decode(batch.records[0].value) == LeaderChangeMessage(1, VOTERS, (1, 2))
    begin = [m for m in cluster.delivered if isinstance(m, RaftRequest) and m.data.api_key == 53]
    assert {m.destination_id for m in begin} == {2}
    assert cluster.clients[2].quorum.kind is StateKind.FOLLOWER and cluster.clients[2].quorum.leader_id == 1
    assert cluster.clients[3].quorum.epoch == 0
    # voter 3 comes back: the leader retries BeginQuorumEpoch (its request timed out) and 3 follows
    cluster.run(300)
    assert cluster.clients[3].quorum.leader_id == 1
    assert cluster.stores[3].state == ElectionState(1, 1, -1, frozenset(VOTERS))
    assert cluster.logs[3].end_offset() == 1 and cluster.clients[3].high_watermark() == 1


def test_high_watermark_needs_a_majority():
    cluster = Cluster()
    cluster.elect(1)
    leader = cluster.clients[1]
    assert leader.high_watermark() == 1  # LeaderChange fetched by the followers
    offset = leader.prepare_append(1, ["a"])
    out = cluster.poll(1)  # appended, the parked fetches answered - but none delivered yet
    assert cluster.logs[1].end_offset() == 2 and leader.high_watermark() == 1
    cut_off_3 = lambda m: 3 in (m.source_id, m.destination_id)  # noqa: E731
    cluster.exchange(out, drop=cut_off_3)  # follower 2 gets it and fetches again: 2 of 3
    assert leader.high_watermark() == offset + 1 == 2
    assert cluster.clients[2].high_watermark() == 2  # its fetch moved the HW: answered at once
    assert cluster.logs[3].end_offset() == 1


def test_follower_truncates_a_diverging_suffix_and_refetches():
    logs = {i: MemoryReplicatedLog() for i in VOTERS}
    for log in logs.values():
        log.append_as_leader([LogRecord(None, b"a"), LogRecord(None, b"b")], 1)
    logs[2].append_as_leader([LogRecord(None, b"stale-1"), LogRecord(None, b"stale-2")], 2)  # an old leader's
    stores = {i: MemoryQuorumStateStore() for i in VOTERS}
    stores[2].write_election_state(ElectionState(2, 2, 2, frozenset(VOTERS)))
    for i in (1, 3):
        stores[i].write_election_state(ElectionState(2, -1, -1, frozenset(VOTERS)))
    cluster = Cluster(logs=logs, stores=stores)
    cluster.elect(1)  # voter 3 grants (its log is no longer than 1's); 2 refuses
    assert cluster.clients[1].quorum.epoch == 3
    fetches = [m for m in cluster.delivered if isinstance(m.data, FetchRequestData) and m.source_id == 2]
    responses = [m for m in cluster.delivered if isinstance(m.data, FetchResponseData) and m.destination_id == 2]
    assert fetches[0].data.fetch_offset == 4 and fetches[0].data.last_fetched_epoch == 2
    assert responses[0].data.diverging_epoch == EpochEndOffset(1, 2)
    assert fetches[1].data.fetch_offset == 2 and fetches[1].data.last_fetched_epoch == 1
    assert [b.records for b in logs[2].read(0)] == [b.records for b in logs[1].read(0)]
    assert logs[2].end_offset() == 3
    cluster.run(150)  # a parked fetch returns within max_wait_ms with the leader's high watermark
    assert cluster.clients[2].high_watermark() == 3


def test_resigned_leader_sends_end_quorum_epoch_and_the_first_successor_stands_at_once():
    cluster = Cluster()
    cluster.elect(1)
    leader = cluster.clients[1]
    leader.prepare_append(1, ["a"])
    cluster.exchange(cluster.poll(1), drop=lambda m: 2 in (m.source_id, m.destination_id))  # 2 falls behind
    leader.resign(1)
    out = cluster.poll(1)
    assert leader.quorum.kind is StateKind.RESIGNED
    ends = [m for m in out if isinstance(m.data, EndQuorumEpochRequestData)]
    assert {m.destination_id for m in ends} == {2, 3}
    assert ends[0].data.preferred_successors[0] == 3
    for m in ends:
        cluster.clients[m.destination_id].handle(m)
    out = cluster.poll(2, 3)
    assert cluster.clients[3].quorum.kind is StateKind.PROSPECTIVE and cluster.clients[3].quorum.epoch == 1
    assert cluster.clients[2].quorum.kind is StateKind.FOLLOWER  # waits its turn (backoff by position)
    # 2 grants the pre-vote (its leader resigned), the resigned leader refuses it; 3 stands and wins epoch 2
    cluster.exchange(out)
    assert cluster.clients[3].quorum.is_leader() and cluster.clients[3].quorum.epoch == 2


def test_observer_discovers_the_leader_replicates_and_never_votes():
    cluster = Cluster(ids=(1, 2, 3, 4))
    cluster.elect(1)
    observer = cluster.clients[4]
    cluster.exchange(cluster.poll(4))
    for _ in range(4):  # its first fetch may go to a voter that is not the leader; a parked fetch
        cluster.time.sleep(50)  # brings the HW within fetch_max_wait_ms
        cluster.exchange(cluster.poll())
    assert observer.quorum.kind is StateKind.FOLLOWER and observer.quorum.leader_id == 1
    assert observer.high_watermark() == 1 and cluster.logs[4].end_offset() == 1
    assert 4 not in cluster.clients[1].quorum.state.voter_end_offsets  # not counted for the HW
    observer.handle(RaftRequest(9, 2, 4, VoteRequestData(5, 2, 9, 9)))
    observer.poll_once()
    assert observer.drain_outbound()[0].data.error_code == INCONSISTENT_VOTER_SET
    assert observer.quorum.epoch == 1
    observer.time.sleep(10_000)  # fetch timeout: an observer never stands
    observer.poll_once()
    assert observer.quorum.kind is not StateKind.CANDIDATE


def test_stale_duplicated_and_unexpected_responses_are_ignored():
    cluster = Cluster()
    follower = cluster.clients[2]
    follower.handle(RaftRequest(1, 1, 2, BeginQuorumEpochRequestData(1, 1)))
    follower.poll_once()
    out = follower.drain_outbound()
    fetch = next(m for m in out if isinstance(m, RaftRequest))
    assert fetch.data == FetchRequestData(2, 1, 0, 0, max_wait_ms=100, high_watermark=-1)
    batch_response = FetchResponseData(NONE, LeaderIdAndEpoch(1, 1), 0, ())
    follower.handle(RaftResponse(fetch.correlation_id + 100, 1, 2, batch_response))  # no such request
    follower.handle(RaftResponse(fetch.correlation_id, 3, 2, batch_response))  # wrong node
    follower.poll_once()
    assert fetch.correlation_id in [r.correlation_id for r in follower._in_flight.values()]
    # a response with a newer epoch moves the follower on
    follower.handle(RaftResponse(fetch.correlation_id, 1, 2, FetchResponseData(FENCED_LEADER_EPOCH, (3, 4))))
    follower.poll_once()
    assert follower.quorum.epoch == 4 and follower.quorum.leader_id == 3
    assert cluster.stores[2].state == ElectionState(4, 3, -1, frozenset(VOTERS))


def test_driver_hands_rpcs_to_the_network_channel_and_resigns_at_shutdown():
    import threading

    from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver, NetworkChannel

    class Channel(NetworkChannel):
        def __init__(self):
            self.sent = []
            self.cond = threading.Condition()

        def send(self, message):
            with self.cond:
                self.sent.append(message)
                self.cond.notify_all()

        def wait_for(self, predicate, timeout=10.0):
            with self.cond:
                assert self.cond.wait_for(lambda: predicate(self.sent), timeout), self.sent

    time = MockTime(current_ns=0)
    client = KafkaRaftClient(
        1,
        VOTERS,
        MemoryReplicatedLog(),
        MemoryQuorumStateStore(),
        StringSerde(),
        time,
        random=random.Random(1),
    )
    channel = Channel()
    driver = KafkaRaftClientDriver(client, channel=channel)
    driver.start()
    try:
        time.sleep(2001)  # past any election timeout
        client.wakeup()
        channel.wait_for(lambda sent: {m.destination_id for m in sent if m.data.api_key == 52} == {2, 3})
        pre_vote = next(m for m in channel.sent if m.destination_id == 2)
        assert pre_vote.data.pre_vote
        client.handle(RaftResponse(pre_vote.correlation_id, 2, 1, VoteResponseData(NONE, -1, 0, True)))
        channel.wait_for(lambda sent: any(m.data.api_key == 52 and not m.data.pre_vote for m in sent))
        vote_request = next(
            m for m in channel.sent if m.destination_id == 2 and m.data.api_key == 52 and not m.data.pre_vote
        )
        client.handle(RaftResponse(vote_request.correlation_id, 2, 1, VoteResponseData(NONE, -1, 1, True)))
        channel.wait_for(lambda sent: any(m.data.api_key == 53 for m in sent))  # BeginQuorumEpoch
        assert client.leader_and_epoch == (1, 1)
    finally:
        driver.shutdown()
    assert not driver.is_alive
    ends = [m for m in channel.sent if isinstance(m.data, EndQuorumEpochRequestData)]
    assert {m.destination_id for m in ends} == {2, 3} and ends[0].data.leader_epoch == 1
    assert client.quorum.kind is StateKind.RESIGNED


def test_leader_cut_off_from_the_majority_resigns_check_quorum():
    cluster = Cluster()
    cluster.elect(1)
    leader = cluster.clients[1]
    isolated = lambda m: 1 in (m.source_id, m.destination_id)  # noqa: E731
    cluster.run(2900, drop=isolated)  # less than 1.5 x fetch timeout (3000 ms) without fetches: still leads
    assert leader.quorum.state.epoch == 1 and leader.quorum.is_leader()
    cluster.run(200, drop=isolated)
    assert leader.quorum.kind is StateKind.RESIGNED and leader.quorum.epoch == 1
    cluster.run(8000, drop=isolated)  # the others elect a leader among themselves
    assert any(c.quorum.is_leader() and c.quorum.epoch > 1 for c in cluster.clients.values())


def test_leader_fetched_by_a_majority_keeps_leading():
    cluster = Cluster()
    cluster.elect(1)
    only_2 = lambda m: 3 in (m.source_id, m.destination_id)  # noqa: E731
    cluster.run(10_000, drop=only_2)
    assert cluster.clients[1].leader_and_epoch == (1, 1)


def test_a_state_without_a_poll_is_an_invariant_error():
    """Each state has its own poll (Kafka's pollLeader, pollCandidate, ...); a state that has none stops
    the client with RaftInvariantError (Kafka's IllegalStateException) instead of idling silently."""
    import dataclasses

    import pytest

    from pykbroker.raft.kafka_raft_client import RaftInvariantError

    @dataclasses.dataclass
    class Unknown:  # a state this client does not know
        kind: str = "Unknown"
        epoch: int = 0

    cluster = Cluster()
    client = cluster.clients[1]
    client.quorum.state = Unknown()
    with pytest.raises(RaftInvariantError, match="Unexpected quorum state"):
        client.poll_once()


def test_fetch_with_a_stale_high_watermark_is_answered_at_once_kip_1166():
    """KIP-1166: a caught-up replica whose Fetch carries a high watermark below the leader's gets the
    leader's at once instead of waiting fetch_max_wait_ms; one that knows it (or does not say) is parked."""
    cluster = Cluster(ids=(1, 2, 3, 4))
    cluster.elect(1)
    cluster.run(200)
    leader = cluster.clients[1]
    assert leader.high_watermark() == 1 == cluster.logs[1].end_offset()

    def fetch(correlation_id, high_watermark=None):
        extra = {} if high_watermark is None else {"high_watermark": high_watermark}
        data = FetchRequestData(4, 1, 1, 1, max_wait_ms=100, **extra)
        leader.handle(RaftRequest(correlation_id, 4, 1, data))
        leader.poll_once()
        return [m for m in leader.drain_outbound() if isinstance(m, RaftResponse)]

    (answer,) = fetch(900, high_watermark=0)
    assert answer.correlation_id == 900 and answer.data.high_watermark == 1 and answer.data.records == ()
    (answer,) = fetch(901, high_watermark=-1)  # knows none yet
    assert answer.data.high_watermark == 1
    assert fetch(902, high_watermark=1) == [] and fetch(903) == []  # up to date / no v18: parked
    cluster.time.sleep(100)
    leader.poll_once()
    answered = [m.correlation_id for m in leader.drain_outbound() if isinstance(m, RaftResponse)]
    assert [c for c in answered if c >= 900] == [902, 903]  # at their max wait


def test_a_follower_learns_the_high_watermark_without_waiting_for_a_parked_fetch():
    """The follower's Fetch says its high watermark (-1 before it knows one), so after catching up it
    learns the leader's at once (the truncation test's follower used to wait a parked fetch out)."""
    cluster = Cluster()
    start = cluster.time.milliseconds()
    cluster.elect(1)
    fetches = [m.data for m in cluster.delivered if isinstance(m.data, FetchRequestData) and m.source_id == 2]
    assert fetches[0].high_watermark == -1
    assert cluster.clients[2].high_watermark() == 1 and cluster.clients[3].high_watermark() == 1  # no time passed
    assert cluster.time.milliseconds() == start
