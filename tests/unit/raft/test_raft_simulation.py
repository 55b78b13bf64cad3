"""Seeded, deterministic simulation of a Raft quorum (the idea of Kafka's ``RaftEventSimulationTest``).

Several :class:`KafkaRaftClient` voters and an observer talk over an in-memory network that loses,
delays (so reorders) and duplicates messages, is partitioned (into groups, or single links cut) and
healed, while nodes crash and restart (keeping their log, snapshots and quorum-state store, losing
everything in memory and every message in flight to or from them - a restart resets connections). The
leader appends records and sometimes resigns. Nodes take snapshots at their high watermark (the state: every
data record below it, as ``offset:value``, rebuilt from the previous snapshot and the log) and clean their
logs up to them, so lagging nodes catch up through FetchSnapshot and restarted nodes load their snapshot.
After every step the invariants are checked:

* at most one leader per epoch (over the whole run);
* a committed record (below some node's high watermark) is on a majority of voters, is never lost or
  changed on any node that has it, and no node has anything else below its high watermark;
* no node's high watermark goes back (across restarts too), nor beyond its log end;
* every listener sees exactly the committed batches, in order, after the snapshot it loaded, and its state
  (snapshot plus batches) is the committed state at its offset;
* a snapshot a node's log starts at is at most the committed end and holds exactly the committed state.

Liveness: the run alternates chaos phases with phases where a random majority of voters (plus the
observer), or every node, is up and fully connected without loss; within a bounded simulated time a
leader must be elected and a fresh append must commit and reach every connected node. (With every node
connected, a voter whose log is behind keeps standing and losing: the others must still elect.)

Four tests break the protocol on purpose (commit on fewer than a majority, vote twice in an epoch,
snapshot above the high watermark, a fresh election timeout on every higher epoch) and check that the
simulation notices.

Pre-vote (KIP-996): scenario runs over several seeds cut a follower off from a healthy leader (or pause it:
no message in or out) for many fetch timeouts and bring it back - the leader keeps its epoch and the
quorum keeps committing - and kill the leader, after which the others still elect one.
"""

from __future__ import annotations

import heapq
import random

import pytest

from pykbroker.raft import epoch_state
from pykbroker.raft.batch_accumulator import NotLeaderError
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.quorum_state import QuorumState
from pykbroker.raft.quorum_state_store import MemoryQuorumStateStore
from pykbroker.raft.raft_client import RaftClientListener
from pykbroker.raft.raft_messages import RaftMessage
from pykbroker.raft.records_snapshot import RecordsSnapshotReader
from pykbroker.raft.replicated_log import LogBatch, MemoryReplicatedLog, ReplicatedLog
from pykbroker.raft.snapshots import SnapshotId
from pykbroker.utils import logging as pyk_logging
from pykbroker.utils.time import MockTime


@pytest.fixture(autouse=True)
def quiet_logs():
    """Thousands of elections log at INFO; only warnings matter here (and rendering costs time)."""
    saved = pyk_logging.saved_config()
    pyk_logging.configure("warning")
    yield
    pyk_logging.restore(saved)


TICK_MS = 5
ELECTION_TIMEOUT_MS = 100
FETCH_TIMEOUT_MS = 200
ELECTION_BACKOFF_MAX_MS = 60
REQUEST_TIMEOUT_MS = 150
FETCH_MAX_WAIT_MS = 50
LIVENESS_BOUND_MS = 4000


class InvariantViolation(AssertionError):
    pass


class StringSerde:
    def write(self, record: str) -> bytes:
        return record.encode()

    def read(self, value: bytes) -> str:
        return value.decode()


class TrackingLog(MemoryReplicatedLog):
    """Remembers the lowest offset it was truncated to since the checker last looked."""

    def __init__(self) -> None:
        super().__init__()
        self.min_truncation: int | None = None
        self.truncations = 0
        self.snapshot_installs = 0

    def _note_truncation(self, offset: int) -> None:
        if offset < self.end_offset():
            self.truncations += 1
            self.min_truncation = offset if self.min_truncation is None else min(self.min_truncation, offset)

    def truncate_to(self, offset: int) -> None:
        self._note_truncation(offset)
        super().truncate_to(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._note_truncation(offset)
        self.snapshot_installs += 1
        super()._truncate_fully_and_start_at(offset)

    def snapshot_state(self, snapshot_id: SnapshotId) -> list[str]:
        raw = self.read_snapshot(snapshot_id)
        assert raw is not None
        return RecordsSnapshotReader(raw, StringSerde()).records()


class CommitListener(RaftClientListener):
    """The state machine: ``state`` is every committed data record as ``offset:value``."""

    def __init__(self) -> None:
        self.base_offsets: list[int] = []
        self.next_offset = 0
        self.state: list[str] = []
        self.error: str | None = None

    def handle_load_snapshot(self, reader) -> None:
        if self.base_offsets and reader.snapshot_id.end_offset <= self.next_offset and self.error is None:
            self.error = f"listener at {self.next_offset} got the older snapshot {reader.snapshot_id}"
        self.state = reader.records()
        self.next_offset = reader.snapshot_id.end_offset

    def handle_commit(self, batch) -> None:
        if batch.base_offset != self.next_offset and self.error is None:
            self.error = f"listener got batch {batch.base_offset}, expected {self.next_offset}"
        self.base_offsets.append(batch.base_offset)
        self.state += [f"{batch.base_offset + i}:{r}" for i, r in enumerate(batch.records)]
        self.next_offset = batch.last_offset + 1


class Node:
    def __init__(self, node_id: int):
        self.id = node_id
        self.log = TrackingLog()
        self.store = MemoryQuorumStateStore()
        self.client: KafkaRaftClient | None = None
        self.listener: CommitListener | None = None
        self.incarnation = 0

    @property
    def alive(self) -> bool:
        return self.client is not None


class Simulation:
    def __init__(self, seed: int, voters: int, observers: int = 1):
        self.rng = random.Random(seed)
        self.time = MockTime(current_ms=1_000_000, current_ns=0)
        self.voters = list(range(1, voters + 1))
        self.observers = list(range(voters + 1, voters + observers + 1))
        self.majority = voters // 2 + 1
        self.nodes = {i: Node(i) for i in self.voters + self.observers}
        self.queue: list[tuple[int, int, int, int, RaftMessage]] = []  # (due, seq, src inc, dst inc, msg)
        self.seq = 0
        self.group: dict[int, int] = {i: 0 for i in self.nodes}  # partition group; same group = connected
        self.cut_links: set[frozenset[int]] = set()  # single links down (non-transitive partitions)
        self.loss = 0.0
        self.duplicate = 0.0
        self.max_delay_ms = 20
        # invariant state
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: dict[int, LogBatch] = {}  # base offset -> batch
        self.committed_end = 0
        self.verified = {i: 0 for i in self.nodes}
        self.last_hw = {i: 0 for i in self.nodes}
        self.appended = 0
        self.steps = 0
        self.recovery_ms: list[int] = []  # per liveness phase: time to elect and commit
        self.snapshots_taken = 0
        for i in self.nodes:
            self.start(i)

    # ---- nodes and network -----------------------------------------------------------------
    def now(self) -> int:
        return self.time.hi_res_milliseconds()

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.incarnation += 1
        node.client = KafkaRaftClient(
            node_id,
            self.voters,
            node.log,
            node.store,
            StringSerde(),
            self.time,
            append_linger_ms=self.rng.choice([0, 10]),
            election_timeout_ms=ELECTION_TIMEOUT_MS,
            fetch_timeout_ms=FETCH_TIMEOUT_MS,
            random=random.Random(self.rng.random()),
            election_backoff_max_ms=ELECTION_BACKOFF_MAX_MS,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            retry_backoff_ms=10,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        node.listener = CommitListener()
        node.client.register(node.listener)
        node.client.initialize()

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.client = None
        node.listener = None

    def connected(self, a: int, b: int) -> bool:
        return self.group[a] == self.group[b] and frozenset((a, b)) not in self.cut_links

    def send(self, message: RaftMessage) -> None:
        copies = 1 + (self.rng.random() < self.duplicate)
        for _ in range(copies):
            if self.rng.random() < self.loss:
                continue
            self.seq += 1
            src, dst = self.nodes[message.source_id], self.nodes[message.destination_id]
            due = self.now() + self.rng.randint(1, self.max_delay_ms)
            heapq.heappush(self.queue, (due, self.seq, src.incarnation, dst.incarnation, message))

    def deliver(self) -> None:
        now = self.now()
        while self.queue and self.queue[0][0] <= now:
            _, _, src_inc, dst_inc, message = heapq.heappop(self.queue)
            src, dst = self.nodes[message.source_id], self.nodes[message.destination_id]
            if dst.client is None or src.incarnation != src_inc or dst.incarnation != dst_inc:
                continue  # a restart resets connections
            if not self.connected(src.id, dst.id):
                continue
            dst.client.handle(message)

    def step(self) -> None:
        self.deliver()
        order = [n for n in self.nodes.values() if n.client is not None]
        self.rng.shuffle(order)
        for node in order:
            assert node.client is not None
            node.client.poll_once()
            for message in node.client.drain_outbound():
                self.send(message)
        self.check()
        self.time.sleep(TICK_MS)
        self.steps += 1

    # ---- workload ----------------------------------------------------------------------------
    def leader(self, among: set[int] | None = None) -> Node | None:
        for node in self.nodes.values():
            if node.client is not None and node.client.quorum.is_leader() and (among is None or node.id in among):
                return node
        return None

    def append(self, among: set[int] | None = None) -> int | None:
        node = self.leader(among)
        if node is None:
            return None
        assert node.client is not None
        self.appended += 1
        try:
            return node.client.prepare_append(node.client.leader_and_epoch.epoch, [f"r{self.appended}"])
        except NotLeaderError:
            return None

    def snapshot(self, node_id: int) -> None:
        """Snapshot ``node_id``'s state at its high watermark (previous snapshot + log) and let the client
        clean the log on its next poll."""
        node = self.nodes[node_id]
        client, log = node.client, node.log
        hw = client.high_watermark() if client is not None else None
        latest = log.latest_snapshot_id()
        if client is None or hw is None or hw <= log.start_offset() or (latest and hw <= latest.end_offset):
            return
        batches = log.read(log.start_offset(), hw)
        if not batches or batches[-1].next_offset != hw:
            return
        earliest = log.earliest_snapshot_id()
        state = (
            log.snapshot_state(earliest) if earliest is not None and earliest.end_offset == log.start_offset() else []
        )
        for b in batches:
            if not b.control:
                state += [f"{b.base_offset + i}:{r.value.decode()}" for i, r in enumerate(b.records)]  # type: ignore[union-attr]
        writer = client.create_snapshot(SnapshotId(hw, batches[-1].epoch), 0)
        if writer is not None:
            writer.append(state)
            writer.freeze()
            self.snapshots_taken += 1

    def committed_state(self, end: int) -> list[str]:
        out: list[str] = []
        for base in sorted(self.committed):
            batch = self.committed[base]
            if base >= end:
                break
            if not batch.control:
                out += [f"{base + i}:{r.value.decode()}" for i, r in enumerate(batch.records)]  # type: ignore[union-attr]
        return out

    # ---- invariants --------------------------------------------------------------------------
    def fail(self, message: str) -> None:
        raise InvariantViolation(f"step {self.steps} (t={self.now()}): {message}")

    def check(self) -> None:
        for node in self.nodes.values():
            client = node.client
            if client is not None and client.quorum.is_leader():
                epoch = client.quorum.epoch
                other = self.leader_of_epoch.setdefault(epoch, node.id)
                if other != node.id:
                    self.fail(f"two leaders in epoch {epoch}: {other} and {node.id}")
        for _ in range(2):  # the second pass verifies nodes against what the first found committed
            for node in self.nodes.values():
                self.check_log(node)
        holders = sum(1 for v in self.voters if self.verified[v] >= self.committed_end)
        if holders < self.majority:
            self.fail(f"committed end {self.committed_end} is on {holders} voters only ({self.verified})")
        for node in self.nodes.values():
            if node.listener is not None and node.listener.error:
                self.fail(f"node {node.id}: {node.listener.error}")

    def check_log(self, node: Node) -> None:
        log = node.log
        if log.min_truncation is not None:
            if log.min_truncation < self.verified[node.id]:
                self.fail(f"node {node.id} truncated committed records (to {log.min_truncation})")
            log.min_truncation = None
        if log.end_offset() < self.verified[node.id]:
            self.fail(f"node {node.id} lost committed records")
        hw = node.client.high_watermark() if node.client is not None else None
        if hw is not None:
            if hw < self.last_hw[node.id]:
                self.fail(f"node {node.id} high watermark went back {self.last_hw[node.id]} -> {hw}")
            if hw > log.end_offset():
                self.fail(f"node {node.id} high watermark {hw} beyond its log end {log.end_offset()}")
            self.last_hw[node.id] = hw
        start = log.start_offset()
        if start > self.verified[node.id]:  # the log starts at a snapshot (taken or installed)
            snapshot_id = log.earliest_snapshot_id()
            if snapshot_id is None or snapshot_id.end_offset != start:
                self.fail(f"node {node.id}: log starts at {start} without a snapshot there ({snapshot_id})")
            if start > self.committed_end:
                self.fail(f"node {node.id} has snapshot {snapshot_id} beyond the committed end {self.committed_end}")
            if log.snapshot_state(snapshot_id) != self.committed_state(start):
                self.fail(f"node {node.id}: snapshot {snapshot_id} is not the committed state")
            self.verified[node.id] = start
        limit = max(self.committed_end, hw or 0)
        if self.verified[node.id] >= limit:
            return
        for batch in log.read(self.verified[node.id]):
            if batch.base_offset >= limit:
                break
            known = self.committed.get(batch.base_offset)
            if known is None and batch.base_offset >= self.committed_end:
                if hw is None or batch.last_offset >= hw:
                    self.fail(f"node {node.id}: high watermark {hw} inside batch {batch}")
                self.committed[batch.base_offset] = batch  # newly committed, learned from this node
            elif known != batch:
                # a node behind (e.g. a deposed leader) may hold other, uncommitted records here - but it
                # must not consider them committed
                if hw is not None and hw > batch.base_offset:
                    self.fail(f"node {node.id} has {batch} below its high watermark {hw}; committed: {known}")
                return
            self.verified[node.id] = batch.next_offset
            self.committed_end = max(self.committed_end, batch.next_offset)

    def check_listeners(self) -> None:
        for node in self.nodes.values():
            if node.listener is None:
                continue
            for base in node.listener.base_offsets:
                if base not in self.committed:
                    self.fail(f"node {node.id} delivered uncommitted batch {base}")
            if node.listener.state != self.committed_state(node.listener.next_offset):
                self.fail(f"node {node.id}: listener state at {node.listener.next_offset} is not the committed one")

    # ---- phases ------------------------------------------------------------------------------
    def chaos(self, steps: int) -> None:
        self.loss = self.rng.choice([0.0, 0.05, 0.2])
        self.duplicate = 0.02
        for _ in range(steps):
            r = self.rng.random()
            alive = [n.id for n in self.nodes.values() if n.alive]
            dead = [n.id for n in self.nodes.values() if not n.alive]
            if r < 0.004 and alive:
                self.crash(self.rng.choice(alive))
            elif r < 0.02 and dead:
                self.start(self.rng.choice(dead))
            elif r < 0.025:
                for i in self.nodes:
                    self.group[i] = self.rng.randint(0, 1)
            elif r < 0.028:
                self.cut_links.add(frozenset(self.rng.sample(sorted(self.nodes), 2)))
            elif r < 0.035:
                for i in self.nodes:
                    self.group[i] = 0
                self.cut_links.clear()
            elif r < 0.0375:  # a power cycle: every voter restarts at once (contended elections)
                for i in self.voters:
                    self.crash(i)
                    self.start(i)
            elif r < 0.04:
                leader = self.leader()
                if leader is not None and leader.client is not None:
                    leader.client.resign(leader.client.quorum.epoch)
            elif r < 0.13:
                self.append()
            elif r < 0.145 and alive:
                self.snapshot(self.rng.choice(alive))
            self.step()

    def liveness(self) -> None:
        """A random majority of voters plus the observers up and connected without loss; the others
        crashed or cut off. A leader must emerge and commit a new record within the bound."""
        majority = set(self.rng.sample(self.voters, self.majority))
        connected = majority | set(self.observers)
        if self.rng.random() < 0.5:  # or everyone: voters whose logs are behind must not hold up the others
            majority = set(self.voters)
            connected |= majority
        self.loss = self.duplicate = 0.0
        self.cut_links.clear()
        for i in self.nodes:
            if i in connected:
                self.group[i] = 0
                if not self.nodes[i].alive:
                    self.start(i)
            elif self.rng.random() < 0.5:
                self.group[i] = 1
            elif self.nodes[i].alive:
                self.crash(i)
        started = self.now()
        deadline = started + LIVENESS_BOUND_MS
        offset: int | None = None
        appended_by: tuple[int, int] | None = None  # (leader, epoch) that took the append
        while True:
            leader = self.leader(among=majority)
            current = None if leader is None else (leader.id, leader.client.quorum.epoch)  # type: ignore[union-attr]
            if current is not None and current != appended_by:  # none yet, or that leader lost its epoch
                offset, appended_by = self.append(among=majority), current
            if offset is not None and all(
                (n := self.nodes[i].client) is not None and (n.high_watermark() or 0) > offset for i in connected
            ):
                self.recovery_ms.append(self.now() - started)
                return
            if self.now() >= deadline:
                states = {i: repr(n.client.quorum.state) for i, n in self.nodes.items() if n.client is not None}
                self.fail(f"no commit within {LIVENESS_BOUND_MS} ms with {sorted(connected)} connected: {states}")
            self.step()

    def run(self, rounds: int, chaos_steps: int) -> None:
        for _ in range(rounds):
            self.chaos(chaos_steps)
            self.liveness()
        self.check_listeners()


SEEDS = range(8)
ROUNDS = 6
CHAOS_STEPS = 500


def run_all(voters: int, first_seed: int) -> list[Simulation]:
    sims = []
    for seed in SEEDS:
        sim = Simulation(first_seed + seed, voters=voters)
        sim.run(rounds=ROUNDS, chaos_steps=CHAOS_STEPS)
        sims.append(sim)
    return sims


@pytest.mark.parametrize("voters,first_seed", [(3, 0), (5, 1000)])
def test_simulation(voters, first_seed):
    sims = run_all(voters, first_seed)
    for sim in sims:
        assert sim.steps >= ROUNDS * CHAOS_STEPS
        assert sim.committed_end > 20  # the workload did commit
        assert len(sim.leader_of_epoch) >= ROUNDS  # and there were elections
    assert sum(sim.steps for sim in sims) >= 25_000
    assert sum(n.log.truncations for sim in sims for n in sim.nodes.values()) > 0  # divergent suffixes were cut
    assert sum(sim.snapshots_taken for sim in sims) > 50
    assert sum(n.log.snapshot_installs for sim in sims for n in sim.nodes.values()) > 5  # FetchSnapshot happened


FAULT_SEEDS = range(32)
"""Seeds an injected bug gets to show itself in (the runs stop at the first violation)."""


def first_violation(voters: int, first_seed: int) -> str:
    with pytest.raises(InvariantViolation) as caught:
        for seed in FAULT_SEEDS:
            Simulation(first_seed + seed, voters=voters).run(rounds=ROUNDS, chaos_steps=CHAOS_STEPS)
    return str(caught.value)


def test_simulation_catches_commit_on_a_minority(monkeypatch):
    """Break the high-watermark rule (the leader commits what it alone has): the checker must fail."""

    def leader_alone(self):
        candidate = self.voter_end_offsets.get(self.local_id, -1)
        if candidate > self.epoch_start_offset and (self.high_watermark is None or candidate > self.high_watermark):
            self.high_watermark = candidate
            return True
        return False

    monkeypatch.setattr(epoch_state.LeaderState, "_maybe_update_high_watermark", leader_alone)
    for voters, first_seed in [(3, 0), (5, 1000)]:
        assert "voters only" in first_violation(voters, first_seed)


def test_simulation_catches_voting_twice_in_an_epoch(monkeypatch):
    """Let a voter grant every candidate of an epoch: the checker must see two leaders in one epoch."""
    monkeypatch.setattr(epoch_state.UnattachedState, "can_grant_vote", lambda self, candidate_id: True)
    for voters, first_seed in [(3, 0), (5, 1000)]:
        assert "two leaders in epoch" in first_violation(voters, first_seed)


def test_simulation_catches_a_snapshot_above_the_high_watermark(monkeypatch):
    """Let nodes snapshot (and so clean to, and serve) their log end instead of their high watermark: the
    checker must see a snapshot holding records that are not committed."""
    monkeypatch.setattr(ReplicatedLog, "create_new_snapshot", lambda self, sid: self.create_new_snapshot_unchecked(sid))
    snapshot = Simulation.snapshot

    def snapshot_at_log_end(self, node_id):
        node = self.nodes[node_id]
        if node.client is None:
            return
        node.client.high_watermark = node.log.end_offset  # an instance attribute shadows the method
        try:
            snapshot(self, node_id)
        finally:
            del node.client.high_watermark

    monkeypatch.setattr(Simulation, "snapshot", snapshot_at_log_end)
    for voters, first_seed in [(3, 0), (5, 1000)]:
        assert "beyond the committed end" in first_violation(voters, first_seed)


def test_simulation_catches_a_stale_candidate_postponing_elections(monkeypatch):
    """Give every voter a fresh election timeout whenever a higher epoch reaches it (instead of keeping the
    time it had left): a voter whose log is behind keeps standing, losing and bumping the epoch, and with
    every node connected nobody else ever stands - the liveness check must fail."""

    def fresh_timeout(self, epoch):
        deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        self._durable_transition(epoch_state.UnattachedState(epoch, self.voters, election_deadline_ms=deadline))

    monkeypatch.setattr(QuorumState, "transition_to_unattached", fresh_timeout)
    # as in a quorum without pre-vote (KIP-996), which would otherwise stop the stale voter from ever
    # bumping the epoch: every pre-vote election is won
    monkeypatch.setattr(epoch_state.ProspectiveState, "is_vote_granted", lambda self: True)
    for voters, first_seed in [(3, 0), (5, 1000)]:
        assert "no commit within" in first_violation(voters, first_seed)


# ---- pre-vote (KIP-996) scenarios ------------------------------------------------------------------
def settle(sim: Simulation, bound_ms: int = LIVENESS_BOUND_MS) -> Node:
    """Step a loss-free, fully connected simulation until a leader has committed a fresh append that every
    live node has; the leader."""
    deadline = sim.now() + bound_ms
    offset = None
    while sim.now() < deadline:
        leader = sim.leader()
        if leader is not None and offset is None:
            offset = sim.append()
        live = [n.client for n in sim.nodes.values() if n.client is not None]
        if leader is not None and offset is not None and all((c.high_watermark() or 0) > offset for c in live):
            return leader
        sim.step()
    sim.fail(f"no leader committing within {bound_ms} ms")
    raise AssertionError  # unreachable: fail raises


def quiet_simulation(seed: int) -> Simulation:
    sim = Simulation(seed, voters=3)
    sim.loss = sim.duplicate = 0.0
    return sim


@pytest.mark.parametrize("seed", range(4))
def test_a_follower_cut_off_from_a_healthy_leader_rejoins_without_a_new_epoch(seed):
    """Voter cut off (a partition, or a pause: no message in or out) for 10 fetch timeouts while the leader
    keeps committing with the third voter; when it comes back nobody's epoch has moved, the leader still
    leads and the returning voter catches up. Without pre-vote it stood epoch after epoch while cut off,
    and its Vote in a higher epoch deposed the leader when it came back."""
    sim = quiet_simulation(seed)
    leader = settle(sim)
    assert leader.client is not None
    epoch = leader.client.quorum.epoch
    lost = next(i for i in sim.voters if i != leader.id)
    for other in sim.nodes:
        if other != lost:
            sim.cut_links.add(frozenset((lost, other)))
    for i in range(10 * FETCH_TIMEOUT_MS // TICK_MS):
        if i % 20 == 0:
            sim.append()
        sim.step()
        assert sim.nodes[lost].client.quorum.epoch == epoch  # type: ignore[union-attr]
    assert leader.client.quorum.is_leader() and leader.client.quorum.epoch == epoch
    sim.cut_links.clear()
    assert settle(sim) is leader and leader.client.quorum.epoch == epoch
    assert max(sim.leader_of_epoch) == epoch
    returned = sim.nodes[lost].client
    assert returned is not None and returned.leader_and_epoch == (leader.id, epoch)


@pytest.mark.parametrize("seed", range(4))
def test_the_others_still_elect_when_the_leader_dies(seed):
    sim = quiet_simulation(seed)
    leader = settle(sim)
    assert leader.client is not None
    epoch = leader.client.quorum.epoch
    sim.crash(leader.id)
    started = sim.now()
    successor = settle(sim)
    assert successor is not leader and successor.client is not None
    assert successor.client.quorum.epoch > epoch
    assert sim.now() - started < 10 * FETCH_TIMEOUT_MS  # elected and committed on every live node
