"""The voter set of a dynamic quorum (KIP-853) and its history in the log.

:class:`VoterSet` mirrors Kafka's ``org.apache.kafka.raft.VoterSet``: voter id -> :class:`Voter` (directory id,
controller endpoints, supported ``kraft.version`` range), converted to and from a ``VotersRecord``. Adding a voter
needs an id not yet in the set; removing one needs the exact (id, directory id) replica key.

:class:`VoterSetHistory` mirrors Kafka's ``KRaftControlRecordStateMachine`` + ``VoterSetHistory``: the voter sets
found in the log (each ``VotersRecord`` is in effect from its own offset, *as soon as it is appended*, not
once committed) and in the snapshot the log starts at, plus the static voter set
(``controller.quorum.voters``) when there is none. ``truncate_new_entries(end)`` forgets the sets at or above
``end`` (a follower truncating its log); ``reset(offset, set)`` starts over from a snapshot. The latest entry is
the voter set the replica uses. :func:`scan_control_batches` finds the ``KRaftVersionRecord`` and ``VotersRecord``
entries of log batches.

Not thread-safe: owned by the Raft IO thread.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pykbroker.raft.control_records import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    KRaftVersionRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    parse_control_type,
)
from pykbroker.raft.replicated_log import LogBatch

NO_DIRECTORY_ID = uuid.UUID(int=0)


@dataclass(frozen=True)
class VoterSet:
    """Immutable: ``voters`` maps a voter id to its :class:`~pykbroker.raft.control_records.Voter`."""

    voters: Mapping[int, Voter]

    @classmethod
    def of(cls, voters: Iterable[Voter]) -> VoterSet:
        return cls({v.voter_id: v for v in voters})

    @classmethod
    def static(cls, ids: Iterable[int], addresses: Mapping[int, tuple[str, int]] | None = None) -> VoterSet:
        """The static voters of ``controller.quorum.voters`` (no directory ids, ``kraft.version`` 0)."""
        addresses = addresses or {}
        voters = []
        for i in ids:
            host_port = addresses.get(i)
            endpoints = (VoterEndpoint("", host_port[0], host_port[1]),) if host_port else ()
            voters.append(Voter(i, NO_DIRECTORY_ID, endpoints, 0, 0))
        return cls.of(voters)

    @classmethod
    def from_record(cls, record: VotersRecord) -> VoterSet:
        return cls.of(record.voters)

    def to_record(self) -> VotersRecord:
        return VotersRecord(tuple(self.voters[i] for i in sorted(self.voters)))

    def ids(self) -> frozenset[int]:
        return frozenset(self.voters)

    def directory_id(self, voter_id: int) -> uuid.UUID:
        voter = self.voters.get(voter_id)
        return voter.directory_id if voter is not None else NO_DIRECTORY_ID

    def address(self, voter_id: int, listener: str | None = None) -> tuple[str, int] | None:
        """The voter's ``(host, port)`` on ``listener`` (its first endpoint when None or not found)."""
        voter = self.voters.get(voter_id)
        if voter is None or not voter.endpoints:
            return None
        for e in voter.endpoints:
            if listener is None or e.name == listener:
                return e.host, e.port
        return voter.endpoints[0].host, voter.endpoints[0].port

    def add(self, voter: Voter) -> VoterSet | None:
        """This set plus ``voter`` (Kafka's ``addVoter``); None when its id is already a voter."""
        if voter.voter_id in self.voters:
            return None
        return VoterSet({**self.voters, voter.voter_id: voter})

    def remove(self, voter_id: int, directory_id: uuid.UUID) -> VoterSet | None:
        """This set without the replica ``(voter_id, directory_id)`` (Kafka's ``removeVoter``); None when it is
        not a voter, or would leave the set empty."""
        voter = self.voters.get(voter_id)
        if voter is None or voter.directory_id != directory_id or len(self.voters) == 1:
            return None
        return VoterSet({i: v for i, v in self.voters.items() if i != voter_id})


def scan_control_batches(batches: Iterable[LogBatch]) -> list[tuple[int, VoterSet | int]]:
    """``(offset, VoterSet)`` for each VotersRecord and ``(offset, kraft_version)`` for each
    KRaftVersionRecord in ``batches``, in offset order. A malformed record is skipped (ValueError swallowed:
    it cannot be a voter set)."""
    found: list[tuple[int, VoterSet | int]] = []
    for batch in batches:
        if not batch.control:
            continue
        for i, record in enumerate(batch.records):
            kind = parse_control_type(record.key)
            try:
                if kind == KRAFT_VOTERS:
                    found.append(
                        (batch.base_offset + i, VoterSet.from_record(VotersRecord.decode(record.value or b"")))
                    )
                elif kind == KRAFT_VERSION:
                    found.append((batch.base_offset + i, KRaftVersionRecord.decode(record.value or b"").kraft_version))
            except (ValueError, IndexError):
                continue
    return found


class VoterSetHistory:
    """The voter sets by offset (see the module docstring). ``static`` is used when the log has none;
    ``kraft_version`` is that of the latest KRaftVersionRecord (0 when none: a static quorum)."""

    def __init__(self, static: VoterSet | None):
        self.static = static
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []
        self._kraft: list[tuple[int, int]] = []

    def latest(self) -> VoterSet | None:
        return self._sets[-1] if self._sets else self.static

    def latest_offset(self) -> int | None:
        """The offset of the latest VotersRecord (-1: one from the snapshot at offset 0), None when the set is
        the static one."""
        return self._offsets[-1] if self._offsets else None

    @property
    def kraft_version(self) -> int:
        return self._kraft[-1][1] if self._kraft else 0

    def is_dynamic(self) -> bool:
        return bool(self._sets) or self.kraft_version > 0

    def voter_set_at(self, offset: int) -> VoterSet | None:
        """The set in effect at ``offset`` (the latest one written at or below it)."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._sets[i - 1] if i else self.static

    def add(self, offset: int, entry: VoterSet | int) -> None:
        if isinstance(entry, VoterSet):
            if self._offsets and offset <= self._offsets[-1]:
                return  # already known (re-reading the same batches)
            self._offsets.append(offset)
            self._sets.append(entry)
        elif not self._kraft or offset > self._kraft[-1][0]:
            self._kraft.append((offset, entry))

    def add_batches(self, batches: Iterable[LogBatch]) -> bool:
        """Record the control records of appended ``batches``; True when the voter set changed."""
        before = self.latest()
        for offset, entry in scan_control_batches(batches):
            self.add(offset, entry)
        return self.latest() != before

    def truncate_new_entries(self, end_offset: int) -> None:
        """Forget every entry at or above ``end_offset`` (the log was truncated there)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        del self._offsets[i:], self._sets[i:]
        self._kraft = [(o, v) for o, v in self._kraft if o < end_offset]

    def reset(self, entries: list[tuple[int, VoterSet | int]]) -> None:
        """Start over from a snapshot's entries (their offsets are the snapshot's end offset - 1)."""
        self._offsets, self._sets, self._kraft = [], [], []
        for offset, entry in entries:
            self.add(offset, entry)
