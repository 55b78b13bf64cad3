"""The Raft epoch states, one class each (Kafka's ``UnattachedState``, ``ProspectiveState``,
``CandidateState``, ``LeaderState``, ``FollowerState``, ``ResignedState``).

Pre-vote (KIP-996): every state answers two questions for a Vote request, ``can_grant_vote`` (a standard,
binding vote in the current epoch) and ``can_grant_pre_vote`` (a non-binding pre-vote, which changes no
state): a pre-vote is refused while the node knows a healthy leader (it leads, resigned, or follows a leader
it fetched from within its fetch timeout) and granted otherwise; the caller adds the log check.

A state is a value for one epoch; moving on means building a new state through
:class:`~pykbroker.raft.quorum_state.QuorumState`, which checks the transition table. States hold plain
data and small decisions (vote tallies, the high watermark rule) and do no I/O. Not thread-safe: owned by
the Raft IO thread.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

from pykbroker.raft.quorum_state_store import NO_ID, ElectionState

_NO_DIRECTORY_ID = uuid.UUID(int=0)

# An observer that has not fetched for this long is forgotten (Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS).
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(frozen=True)
class ReplicaState:
    """One replica as its leader sees it (Kafka's ``LeaderState.ReplicaState``), for DescribeQuorum.

    ``end_offset`` is the replica's log end offset (its last fetch offset; -1: unknown); times are wall-clock
    ms (``Time.milliseconds()``, as Kafka's DescribeQuorum reports them), -1 for never. A replica is caught
    up when it fetches at or beyond the leader's end offset (caught up now), or at or beyond the leader's
    end offset at its previous fetch (caught up as of that previous fetch). Immutable: the leader replaces
    the value on each update, so a reader on another thread that copies the dict holding them sees each
    replica consistently."""

    replica_id: int
    end_offset: int = -1
    last_fetch_timestamp: int = -1
    last_fetch_leader_end_offset: int = -1
    last_caught_up_timestamp: int = -1
    #: the directory id its last Fetch carried (Fetch v17 ``replica_directory_id``; zero: none), KIP-853's
    #: replica key with ``replica_id``
    directory_id: uuid.UUID = _NO_DIRECTORY_ID

    def after_fetch(
        self, now_ms: int, fetch_offset: int, leader_end_offset: int | None, directory_id: uuid.UUID | None = None
    ) -> ReplicaState:
        """This state after a valid Fetch at ``fetch_offset`` (Kafka's ``updateFollowerState``); ``directory_id``
        (None: unchanged) is the one the Fetch carried."""
        caught_up, last_leader_end = self.last_caught_up_timestamp, self.last_fetch_leader_end_offset
        if leader_end_offset is not None:
            if fetch_offset >= leader_end_offset:
                caught_up = max(caught_up, now_ms)
            elif last_leader_end > 0 and fetch_offset >= last_leader_end:
                caught_up = max(caught_up, self.last_fetch_timestamp)
            last_leader_end = leader_end_offset
        return ReplicaState(
            self.replica_id,
            fetch_offset,
            max(self.last_fetch_timestamp, now_ms),
            last_leader_end,
            caught_up,
            self.directory_id if directory_id is None else directory_id,
        )


class StateKind(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


class EpochState:
    kind: StateKind
    epoch: int
    voters: frozenset[int]

    def election(self) -> ElectionState:
        raise NotImplementedError

    @property
    def leader_id(self) -> int:
        return NO_ID

    def can_grant_vote(self, candidate_id: int) -> bool:
        return False

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        """Whether this state grants a pre-vote (KIP-996) to a voter whose log is up to date: only when
        it knows no healthy leader. Leader and Resigned never do."""
        return False

    def __repr__(self) -> str:
        return f"{self.kind.value}State(epoch={self.epoch}, leader={self.leader_id})"


@dataclass(repr=False)
class UnattachedState(EpochState):
    """No known leader in ``epoch``; possibly voted (Kafka 3.9 folds Voted into Unattached)."""

    epoch: int
    voters: frozenset[int]
    voted_id: int = NO_ID
    election_deadline_ms: int = 0
    kind: StateKind = field(default=StateKind.UNATTACHED, init=False)

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, NO_ID, self.voted_id, self.voters)

    def can_grant_vote(self, candidate_id: int) -> bool:
        return self.voted_id in (NO_ID, candidate_id)

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True


class _VoteTally:
    """The granted / rejected bookkeeping of an election (Kafka's ``EpochElection``), shared by the
    pre-vote (Prospective) and the vote (Candidate). The local voter has granted itself."""

    voters: frozenset[int]
    granted: set[int]
    rejected: set[int]

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def record_granted_vote(self, voter_id: int) -> None:
        if voter_id not in self.voters:
            raise ValueError(f"{voter_id} is not a voter")
        self.granted.add(voter_id)

    def record_rejected_vote(self, voter_id: int) -> None:
        if voter_id not in self.voters:
            raise ValueError(f"{voter_id} is not a voter")
        self.rejected.add(voter_id)

    def is_vote_granted(self) -> bool:
        return len(self.granted) >= self.majority()

    def is_vote_rejected(self) -> bool:
        return len(self.voters) - len(self.rejected) < self.majority()

    def unrecorded_voters(self) -> set[int]:
        """Voters that have neither granted nor rejected (the ones to ask)."""
        return set(self.voters) - self.granted - self.rejected


@dataclass(repr=False)
class ProspectiveState(_VoteTally, EpochState):
    """KIP-996's Prospective: the fetch (or election) timeout expired, so this voter asks the others for
    pre-votes in ``epoch`` without bumping it (Kafka's ``ProspectiveState``). It keeps what it knew of the
    epoch - the ``leader`` it followed (NO_ID if none) and its ``voted_id`` - so that losing the pre-vote
    election (a majority refused, or ``election_deadline_ms`` passed) takes it back to following that
    leader, or to Unattached, in the same epoch. Winning (a majority granted) makes it a Candidate in
    ``epoch + 1``. Grants pre-votes itself (it knows no healthy leader) and standard votes as Unattached
    does."""

    epoch: int
    voters: frozenset[int]
    local_id: int
    leader: int = NO_ID
    voted_id: int = NO_ID
    election_deadline_ms: int = 0
    retries: int = 0  # failed elections in a row, carried from a Candidate (its next backoff grows)
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    kind: StateKind = field(default=StateKind.PROSPECTIVE, init=False)

    def __post_init__(self) -> None:
        self.granted.add(self.local_id)

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader, self.voted_id, self.voters)

    @property
    def leader_id(self) -> int:
        return self.leader

    def can_grant_vote(self, candidate_id: int) -> bool:
        return self.leader == NO_ID and self.voted_id in (NO_ID, candidate_id)

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True


@dataclass(repr=False)
class CandidateState(_VoteTally, EpochState):
    """Asking for votes in ``epoch`` (it has voted for itself)."""

    epoch: int
    voters: frozenset[int]
    local_id: int
    retries: int = 1
    election_deadline_ms: int = 0
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_deadline_ms: int | None = None
    kind: StateKind = field(default=StateKind.CANDIDATE, init=False)

    def __post_init__(self) -> None:
        self.granted.add(self.local_id)

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, NO_ID, self.local_id, self.voters)

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        return True

    def start_backing_off(self, now_ms: int, backoff_ms: int) -> None:
        """The election failed (timed out or a majority rejected): wait ``backoff_ms`` before the next."""
        self.backoff_deadline_ms = now_ms + backoff_ms


@dataclass(repr=False)
class LeaderState(EpochState):
    """Leading ``epoch`` since ``epoch_start_offset`` (where its LeaderChange record sits).

    Tracks every voter's end offset; the high watermark is the offset a majority has reached (sort the
    voters' end offsets descending, take index ``len(voters) // 2``), accepted only once it is above the
    epoch start offset (a leader may commit only once a record of its own epoch is committed) and only
    when it increases.

    ``replica_states`` (voters) and ``observer_states`` hold each replica's :class:`ReplicaState`, updated on
    every valid Fetch (``update_replica_end_offset`` with ``now_ms``) and, for the leader itself, on each
    flush; DescribeQuorum reads them (:mod:`pykbroker.raft.describe_quorum`). The two dicts are only ever
    written by the owning IO thread and hold immutable values, so ``dict(...)`` copies taken on another
    thread are consistent per replica."""

    epoch: int
    voters: frozenset[int]
    local_id: int
    epoch_start_offset: int
    high_watermark: int | None = None
    voter_end_offsets: dict[int, int] = field(default_factory=dict)
    observer_end_offsets: dict[int, int] = field(default_factory=dict)
    acknowledged: set[int] = field(default_factory=set)
    check_quorum_deadline_ms: int = 0
    check_quorum_timeout_ms: int = 0
    fetched_voters: set[int] = field(default_factory=set)
    replica_states: dict[int, ReplicaState] = field(default_factory=dict)
    observer_states: dict[int, ReplicaState] = field(default_factory=dict)
    kind: StateKind = field(default=StateKind.LEADER, init=False)

    def __post_init__(self) -> None:
        self.acknowledged.add(self.local_id)
        for v in sorted(self.voters):
            self.replica_states.setdefault(v, ReplicaState(v))

    def start_check_quorum(self, now_ms: int, timeout_ms: int) -> None:
        """Kafka's check-quorum: the leader resigns if a majority of voters has not fetched within
        ``timeout_ms`` (1.5 x the fetch timeout) - an isolated leader must not hold on to its epoch."""
        self.check_quorum_timeout_ms = timeout_ms
        self.check_quorum_deadline_ms = now_ms + timeout_ms

    def record_voter_fetch(self, voter_id: int, now_ms: int) -> None:
        if voter_id not in self.voters:
            return
        self.fetched_voters.add(voter_id)
        if len(self.fetched_voters | {self.local_id}) >= len(self.voters) // 2 + 1:
            self.fetched_voters.clear()
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    def has_check_quorum_expired(self, now_ms: int) -> bool:
        return self.check_quorum_timeout_ms > 0 and now_ms >= self.check_quorum_deadline_ms

    def non_acknowledging_voters(self) -> set[int]:
        """Voters that have not yet confirmed the epoch (BeginQuorumEpoch response or a Fetch)."""
        return set(self.voters) - self.acknowledged

    def add_acknowledgement(self, voter_id: int) -> None:
        if voter_id in self.voters:
            self.acknowledged.add(voter_id)

    def preferred_successors(self) -> tuple[int, ...]:
        """The other voters, most caught up first (EndQuorumEpoch ``preferred_successors``)."""
        others = [v for v in self.voters if v != self.local_id]
        return tuple(sorted(others, key=lambda v: (-self.voter_end_offsets.get(v, -1), v)))

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id, self.voters)

    @property
    def leader_id(self) -> int:
        return self.local_id

    def update_local_end_offset(self, end_offset: int) -> bool:
        """Record the leader's own flushed end offset; True iff the high watermark moved."""
        if self.local_id in self.voters:
            self.replica_states[self.local_id] = replace(self.replica_states[self.local_id], end_offset=end_offset)
        return self.update_replica_end_offset(self.local_id, end_offset)

    def update_replica_end_offset(
        self, voter_id: int, end_offset: int, now_ms: int | None = None, directory_id: uuid.UUID | None = None
    ) -> bool:
        """Record a replica's end offset (from its valid Fetch at ``end_offset``); True iff the high watermark
        moved. With ``now_ms`` (a remote replica's Fetch) also its :class:`ReplicaState` (fetch and
        caught-up times, Kafka's ``updateReplicaState``, and the ``directory_id`` the Fetch carried); negative ids
        (not a replica) are ignored there."""
        if now_ms is not None and voter_id >= 0 and voter_id != self.local_id:
            self._record_fetch(voter_id, end_offset, now_ms, directory_id)
        if voter_id in self.voters:
            self.voter_end_offsets[voter_id] = max(end_offset, self.voter_end_offsets.get(voter_id, -1))
        else:
            self.observer_end_offsets[voter_id] = end_offset
            return False
        return self._maybe_update_high_watermark()

    def _record_fetch(self, replica_id: int, fetch_offset: int, now_ms: int, directory_id: uuid.UUID | None) -> None:
        leader_end = self.voter_end_offsets.get(self.local_id)
        if replica_id in self.voters:
            self.replica_states[replica_id] = self.replica_states[replica_id].after_fetch(
                now_ms, fetch_offset, leader_end, directory_id
            )
            return
        previous = self.observer_states.get(replica_id, ReplicaState(replica_id))
        expired = [
            o
            for o, st in self.observer_states.items()
            if now_ms - st.last_fetch_timestamp >= OBSERVER_SESSION_TIMEOUT_MS and o != replica_id
        ]
        if expired:  # Kafka's clearInactiveObservers (a new dict: readers may hold the old one)
            self.observer_states = {o: st for o, st in self.observer_states.items() if o not in expired}
        self.observer_states[replica_id] = previous.after_fetch(now_ms, fetch_offset, leader_end, directory_id)

    def update_voters(self, voters: frozenset[int]) -> bool:
        """KIP-853: the voter set changed (a VotersRecord was appended): new voters move from the observers
        to the voters, removed ones the other way (Kafka's ``updateVoterAndObserverStates``); the high
        watermark is the majority end offset of the new set from now on. True iff the high watermark moved."""
        old = self.voters
        self.voters = voters
        for v in voters - old:
            self.replica_states[v] = self.observer_states.get(v, ReplicaState(v))
            self.observer_states = {o: st for o, st in self.observer_states.items() if o != v}
            if v in self.observer_end_offsets:
                self.voter_end_offsets[v] = self.observer_end_offsets.pop(v)
        for v in old - voters:
            state = self.replica_states.get(v)
            self.replica_states = {r: st for r, st in self.replica_states.items() if r != v}
            if state is not None and v != self.local_id:
                self.observer_states[v] = state
            if v in self.voter_end_offsets:
                self.observer_end_offsets[v] = self.voter_end_offsets.pop(v)
        self.acknowledged &= voters | {self.local_id}
        self.fetched_voters &= voters
        if not voters:
            return False
        return self._maybe_update_high_watermark()

    def _maybe_update_high_watermark(self) -> bool:
        offsets = sorted((self.voter_end_offsets.get(v, -1) for v in self.voters), reverse=True)
        candidate = offsets[len(self.voters) // 2]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is None or candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False


@dataclass(repr=False)
class FollowerState(EpochState):
    """Following ``leader`` in ``epoch``; learns the high watermark from Fetch responses."""

    epoch: int
    voters: frozenset[int]
    leader: int
    fetch_deadline_ms: int = 0
    high_watermark: int | None = None
    #: a successful Fetch (or FetchSnapshot) answer came from the leader since this state began, and the
    #: leader has not resigned (EndQuorumEpoch) since: the leader is healthy, so pre-votes are refused
    has_fetched_from_leader: bool = False
    kind: StateKind = field(default=StateKind.FOLLOWER, init=False)

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader, NO_ID, self.voters)

    @property
    def leader_id(self) -> int:
        return self.leader

    def override_fetch_timeout(self, now_ms: int, timeout_ms: int) -> None:
        """The leader resigned (EndQuorumEpoch): give up on it after ``timeout_ms`` instead, and grant
        pre-votes from now on (the leader is going away)."""
        self.fetch_deadline_ms = now_ms + timeout_ms
        self.has_fetched_from_leader = False

    def record_successful_fetch(self, now_ms: int, fetch_timeout_ms: int) -> None:
        """The leader answered a Fetch: it is healthy for another ``fetch_timeout_ms``."""
        self.fetch_deadline_ms = now_ms + fetch_timeout_ms
        self.has_fetched_from_leader = True

    def can_grant_pre_vote(self, now_ms: int) -> bool:
        """KIP-996: refuse while the leader is healthy - it answered a fetch within the fetch timeout."""
        return not self.has_fetched_from_leader or now_ms >= self.fetch_deadline_ms

    def update_high_watermark(self, hw: int | None) -> bool:
        if hw is None or (self.high_watermark is not None and hw <= self.high_watermark):
            return False
        self.high_watermark = hw
        return True


@dataclass(repr=False)
class ResignedState(EpochState):
    """A former leader of ``epoch`` that stepped down (or restarted) and awaits the next election."""

    epoch: int
    voters: frozenset[int]
    local_id: int
    election_deadline_ms: int = 0
    preferred_successors: tuple[int, ...] = ()
    unacknowledged: set[int] = field(default_factory=set)
    kind: StateKind = field(default=StateKind.RESIGNED, init=False)

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, NO_ID, self.voters)

    @property
    def leader_id(self) -> int:
        return self.local_id
