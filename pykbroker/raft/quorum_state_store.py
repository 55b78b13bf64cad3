"""Durable election state: the ``quorum-state`` file in the metadata log directory.

Mirrors ``org.apache.kafka.raft.{ElectionState, QuorumStateStore, FileQuorumStateStore}``. The file is
JSON in Kafka's ``QuorumStateData`` version 0 shape::

    {"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}

It is rewritten (temp file, fsync, rename, fsync dir) on every state transition, before the new state
takes effect, so a restarted node never votes twice in one epoch nor forgets an epoch it led.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from pykbroker.utils.files import atomic_write

QUORUM_STATE_FILE = "quorum-state"
NO_ID = -1


@dataclass(frozen=True)
class ElectionState:
    """Who led or was voted for in ``epoch`` (-1 = nobody)."""

    epoch: int
    leader_id: int = NO_ID
    voted_id: int = NO_ID
    voters: frozenset[int] = field(default_factory=frozenset)

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id != NO_ID and self.leader_id == node_id

    def has_leader(self) -> bool:
        return self.leader_id != NO_ID

    def has_voted(self) -> bool:
        return self.voted_id != NO_ID


class QuorumStateStore(ABC):
    """Reads and writes the :class:`ElectionState`. Called from the Raft IO thread only."""

    @abstractmethod
    def read_election_state(self) -> ElectionState | None: ...

    @abstractmethod
    def write_election_state(self, state: ElectionState) -> None: ...

    def clear(self) -> None:  # noqa: B027 - optional hook: stores without state to clear keep this no-op
        pass


class MemoryQuorumStateStore(QuorumStateStore):
    def __init__(self) -> None:
        self.state: ElectionState | None = None

    def read_election_state(self) -> ElectionState | None:
        return self.state

    def write_election_state(self, state: ElectionState) -> None:
        self.state = state

    def clear(self) -> None:
        self.state = None


class FileQuorumStateStore(QuorumStateStore):
    """``<log_dir>/quorum-state``. Raises ``OSError`` on I/O failure and ``ValueError`` on a corrupt file."""

    def __init__(self, log_dir: str):
        self.path = os.path.join(log_dir, QUORUM_STATE_FILE)

    def read_election_state(self) -> ElectionState | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            voters = data.get("currentVoters") or []
            return ElectionState(
                epoch=int(data["leaderEpoch"]),
                leader_id=int(data.get("leaderId", NO_ID)),
                voted_id=int(data.get("votedId", NO_ID)),
                voters=frozenset(int(v["voterId"]) for v in voters),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"Error while reading the quorum state file {self.path}: {e}") from e

    def write_election_state(self, state: ElectionState) -> None:
        data = {
            "clusterId": "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in sorted(state.voters)] if state.voters else None,
            "data_version": 0,
        }
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        atomic_write(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"))

    def clear(self) -> None:
        for p in (self.path, self.path + ".tmp"):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
