"""QuorumState: the current epoch state, its transition table, and durable transitions.

Mirrors ``org.apache.kafka.raft.QuorumState``. Every transition is checked against
:data:`TRANSITIONS` and the epoch rules, written to the :class:`QuorumStateStore` first, and only then
made current; an illegal move raises :class:`IllegalRaftStateTransition` at once.

Epoch rules: a candidate always starts a new epoch (current + 1); a leader keeps the candidate's epoch;
unattached/follower moves may keep the epoch only where Kafka allows it (learning the leader of the same
epoch, voting in it, or a Prospective losing its pre-vote election), otherwise the epoch must grow.

Pre-vote (KIP-996): a voter whose fetch or election timeout expires becomes Prospective in the *same*
epoch; only a Prospective that won a majority of pre-votes becomes Candidate (the only voter excepted: it
has no one to ask and elects itself at once).

Not thread-safe: owned by the Raft IO thread (``KafkaRaftClient.poll``).
"""

from __future__ import annotations

import random as _random

from pykbroker.raft.epoch_state import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    StateKind,
    UnattachedState,
)
from pykbroker.raft.quorum_state_store import NO_ID, ElectionState, QuorumStateStore
from pykbroker.utils.time import SYSTEM, Time

U, P, C, L, F, R = (
    StateKind.UNATTACHED,
    StateKind.PROSPECTIVE,
    StateKind.CANDIDATE,
    StateKind.LEADER,
    StateKind.FOLLOWER,
    StateKind.RESIGNED,
)

TRANSITIONS: dict[StateKind, frozenset[StateKind]] = {
    U: frozenset({U, P, C, F}),  # C: the only voter
    P: frozenset({U, C, F}),
    C: frozenset({U, P, C, L, F}),  # C again: the only voter
    L: frozenset({U, R, F}),  # F and U only in a higher epoch
    F: frozenset({U, P, C, F}),  # C: the only voter
    R: frozenset({U, P, C, F}),  # C: the only voter
}
"""Allowed moves: current kind -> kinds it may become (Kafka's QuorumState transition methods)."""


class IllegalRaftStateTransition(RuntimeError):
    pass


class QuorumState:
    """The local node's view of the quorum. ``local_id`` may be None for an observer without an id."""

    def __init__(
        self,
        local_id: int | None,
        voters: frozenset[int] | set[int],
        store: QuorumStateStore,
        time: Time = SYSTEM,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        random: _random.Random | None = None,
    ):
        self.local_id = local_id
        self.voters = frozenset(voters)
        self.store = store
        self.time = time
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.random = random or _random.Random()
        #: KIP-853: the voter set comes from the log; votes may go to replicas this node does not know as voters
        self.dynamic = False
        self.state: EpochState = UnattachedState(0, self.voters)

    # ---- queries -----------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        """The leader this node knows of in the current epoch (a Prospective still names the one it
        followed, as Kafka's), NO_ID if none."""
        return self.state.leader_id if self.state.kind in (L, F, P) else NO_ID

    @property
    def kind(self) -> StateKind:
        return self.state.kind

    def is_voter(self) -> bool:
        return self.local_id is not None and self.local_id in self.voters

    def is_only_voter(self) -> bool:
        return self.is_voter() and len(self.voters) == 1

    def is_leader(self) -> bool:
        return self.state.kind is L

    def random_election_timeout_ms(self) -> int:
        return self.election_timeout_ms + self.random.randint(0, self.election_timeout_ms)

    def update_voters(self, voters: frozenset[int]) -> bool:
        """KIP-853: the voter set in the log changed. The current state keeps its kind and epoch and
        uses the new set (a leader's replica states and high watermark follow; True iff that high watermark
        moved). Only a Leader or Follower appends, truncates or installs snapshots, so only they see it change
        (an observer's Unattached state holds no votes)."""
        self.voters = frozenset(voters)
        state = self.state
        if isinstance(state, LeaderState):
            return state.update_voters(self.voters)
        state.voters = self.voters
        return False

    # ---- start-up ----------------------------------------------------------------------------
    def initialize(self, log_end_epoch: int) -> None:
        """Rebuild the state from the store (``QuorumState.initialize``): a node that led the stored
        epoch comes back Resigned (it must win a new epoch), one that voted for itself comes back
        Prospective in that epoch (the only voter: Candidate), a known leader makes it a follower, else
        Unattached (voted or not).
        If the log holds a newer epoch than the store, start Unattached at the log's epoch."""
        election = self.store.read_election_state() or ElectionState(0, voters=self.voters)
        now = self.time.hi_res_milliseconds()
        deadline = now + self.random_election_timeout_ms()
        state: EpochState
        if election.epoch < log_end_epoch:
            state = UnattachedState(log_end_epoch, self.voters, election_deadline_ms=deadline)
        elif self.local_id is not None and election.is_leader(self.local_id):
            others = set(self.voters) - {self.local_id}
            state = ResignedState(election.epoch, self.voters, self.local_id, deadline, tuple(sorted(others)), others)
        elif self.local_id is not None and election.voted_id == self.local_id and self.is_only_voter():
            state = CandidateState(election.epoch, self.voters, self.local_id, election_deadline_ms=deadline)
        elif self.local_id is not None and election.voted_id == self.local_id and self.is_voter():
            # voted for itself in the epoch (a candidate, or a resigned leader asking for pre-votes): it may
            # only stand again in a new epoch, after a pre-vote (Kafka 4's restart into Prospective)
            state = ProspectiveState(
                election.epoch, self.voters, self.local_id, voted_id=self.local_id, election_deadline_ms=deadline
            )
        elif election.has_voted():
            state = UnattachedState(election.epoch, self.voters, election.voted_id, deadline)
        elif election.has_leader():
            state = FollowerState(
                election.epoch, self.voters, election.leader_id, fetch_deadline_ms=now + self.fetch_timeout_ms
            )
        else:
            state = UnattachedState(election.epoch, self.voters, election_deadline_ms=deadline)
        self._durable_transition(state)

    # ---- transitions -------------------------------------------------------------------------
    def _check(self, to: StateKind, epoch: int) -> None:
        frm = self.state.kind
        if to not in TRANSITIONS[frm]:
            raise IllegalRaftStateTransition(f"Cannot transition from {self.state} to {to.value} (epoch {epoch})")
        if epoch < self.epoch:
            raise IllegalRaftStateTransition(
                f"Cannot transition from {self.state} to {to.value} with a smaller epoch {epoch}"
            )

    def _durable_transition(self, state: EpochState) -> None:
        self.store.write_election_state(state.election())
        self.state = state

    def transition_to_unattached(self, epoch: int) -> None:
        """Learned of a higher epoch without a leader (or gave up leading)."""
        self._check(U, epoch)
        if epoch <= self.epoch and self.state.kind not in (U, P):
            raise IllegalRaftStateTransition(f"Cannot move from {self.state} to Unattached in epoch {epoch}")
        if epoch < self.epoch or (epoch == self.epoch and self.state.kind is P and self.state.leader_id != NO_ID):
            raise IllegalRaftStateTransition(f"Cannot move from {self.state} to Unattached in epoch {epoch}")
        if epoch == self.epoch and self.state.kind is U:
            raise IllegalRaftStateTransition(f"Already Unattached in epoch {epoch}")
        # Kafka's QuorumState.transitionToUnattached: an Unattached voter or a Candidate keeps the time it
        # had left. Otherwise a candidate that cannot win (its log is behind) would push every other voter's
        # election back with each of its epochs, and nobody would ever be elected.
        state = self.state
        voted = NO_ID
        if isinstance(state, ProspectiveState) and epoch == state.epoch:
            # lost its pre-vote election: back to Unattached in the epoch (keeping its vote), and a fresh
            # election timeout before it tries again (Kafka's prospectiveTransitionAfterElectionLoss)
            voted = state.voted_id
            deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        elif isinstance(state, UnattachedState | CandidateState | ProspectiveState) and state.election_deadline_ms:
            deadline = state.election_deadline_ms
        else:
            deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        self._durable_transition(UnattachedState(epoch, self.voters, voted, election_deadline_ms=deadline))

    def transition_to_unattached_voted(self, epoch: int, candidate_id: int) -> None:
        """Grant our vote to ``candidate_id`` in ``epoch`` (durably, before answering)."""
        self._check(U, epoch)
        state = self.state
        if epoch == self.epoch and not (state.kind in (U, P) and state.can_grant_vote(candidate_id)):
            raise IllegalRaftStateTransition(f"Cannot vote for {candidate_id} in {state}")
        if candidate_id not in self.voters and not self.dynamic:
            raise IllegalRaftStateTransition(f"Cannot vote for non-voter {candidate_id}")
        deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        self._durable_transition(UnattachedState(epoch, self.voters, candidate_id, deadline))

    def transition_to_prospective(self) -> None:
        """KIP-996: the fetch or election timeout expired; ask for pre-votes in the current epoch, keeping
        the leader followed (from Follower) or the vote given (from Unattached). From Candidate (after its
        failed election's backoff) or Resigned the vote it keeps is its own."""
        if not self.is_voter():
            raise IllegalRaftStateTransition(f"Cannot become prospective: local id {self.local_id} is not a voter")
        state = self.state
        self._check(P, self.epoch)
        assert self.local_id is not None
        leader = state.leader if isinstance(state, FollowerState) else NO_ID
        if isinstance(state, UnattachedState):
            voted = state.voted_id
        elif isinstance(state, CandidateState | ResignedState):
            # it voted for itself in this epoch (and a resigned leader won it): it must never grant that vote
            # to another, nor - restarted - stand in this epoch again
            voted = self.local_id
        else:
            voted = NO_ID
        retries = state.retries if isinstance(state, CandidateState) else 0
        deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        self._durable_transition(
            ProspectiveState(self.epoch, self.voters, self.local_id, leader, voted, deadline, retries)
        )

    def transition_to_candidate(self, skip_pre_vote: bool = False) -> None:
        """Stand in ``epoch + 1`` (voting for ourselves): a Prospective that won its pre-votes (or, with
        ``skip_pre_vote``, learnt that a voter does not support them), or the only voter from any state
        but Leader."""
        if not self.is_voter():
            raise IllegalRaftStateTransition(f"Cannot become candidate: local id {self.local_id} is not a voter")
        state = self.state
        if state.kind is not P and not self.is_only_voter():
            raise IllegalRaftStateTransition(f"Cannot become candidate from {state} without winning a pre-vote")
        if isinstance(state, ProspectiveState) and not state.is_vote_granted() and not skip_pre_vote:
            raise IllegalRaftStateTransition(f"Cannot become candidate from {state} without a majority of pre-votes")
        retries = self.state.retries + 1 if isinstance(self.state, CandidateState | ProspectiveState) else 1
        new_epoch = self.epoch + 1
        self._check(C, new_epoch)
        deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        assert self.local_id is not None
        self._durable_transition(CandidateState(new_epoch, self.voters, self.local_id, retries, deadline))

    def transition_to_leader(self, epoch_start_offset: int) -> LeaderState:
        state = self.state
        self._check(L, self.epoch)
        if not isinstance(state, CandidateState) or not state.is_vote_granted():
            raise IllegalRaftStateTransition(f"Cannot become leader from {state} without a majority")
        leader = LeaderState(self.epoch, self.voters, state.local_id, epoch_start_offset)
        self._durable_transition(leader)
        return leader

    def transition_to_follower(self, epoch: int, leader_id: int) -> None:
        state = self.state
        self._check(F, epoch)
        if leader_id == self.local_id:
            raise IllegalRaftStateTransition("Cannot follow ourselves")
        if epoch == self.epoch:
            if state.kind in (L, R) or (state.kind is F and state.leader_id == leader_id):
                raise IllegalRaftStateTransition(f"Cannot follow {leader_id} from {state} in the same epoch")
            if state.kind in (F, P) and state.leader_id not in (NO_ID, leader_id):
                raise IllegalRaftStateTransition(f"Two leaders ({state.leader_id}, {leader_id}) in epoch {epoch}")
        deadline = self.time.hi_res_milliseconds() + self.fetch_timeout_ms
        self._durable_transition(FollowerState(epoch, self.voters, leader_id, fetch_deadline_ms=deadline))

    def transition_to_resigned(self) -> ResignedState:
        """The leader steps down in its epoch; it tells the other voters with EndQuorumEpoch, naming
        its ``preferred_successors`` (most caught up first)."""
        state = self.state
        self._check(R, self.epoch)
        assert isinstance(state, LeaderState)
        deadline = self.time.hi_res_milliseconds() + self.random_election_timeout_ms()
        resigned = ResignedState(
            self.epoch,
            self.voters,
            state.local_id,
            deadline,
            state.preferred_successors(),
            set(self.voters) - {state.local_id},
        )
        self._durable_transition(resigned)
        return resigned
