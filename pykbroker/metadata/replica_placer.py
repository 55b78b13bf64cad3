"""StripedReplicaPlacer: where the replicas of new partitions go (Kafka's ``StripedReplicaPlacer``).

Behaviour: brokers are grouped by rack (racks sorted; brokers without a rack form one
group), each rack keeping a sorted list of unfenced brokers and one of fenced brokers, each list starting at
a random offset. For every partition, the leader is the next unfenced broker found walking the racks from the
current rack offset; the other replicas take, rack by rack round-robin, the next broker of each rack
(unfenced first, then fenced), skipping the leader's rack once. Each partition moves the starting rack on by
one and each list's offset on by one (striping), so leaders and followers spread evenly. After as many
partitions as there are unfenced brokers the racks and lists are shuffled, to avoid repeating the same
assignments. No broker appears twice in a partition.

Not thread-safe; used on the controller's event thread. ``random`` is injectable for deterministic tests.
"""

from __future__ import annotations

import random as _random
from collections.abc import Iterable
from dataclasses import dataclass

from pykbroker.protocol.errors import InvalidReplicationFactorError


@dataclass(frozen=True)
class UsableBroker:
    id: int
    rack: str | None
    fenced: bool


class _Cursor:
    """A broker list walked round-robin from an offset; ``round`` restarts the walk one further on."""

    def __init__(self, brokers: list[int], rnd: _random.Random):
        self.brokers = sorted(brokers)
        self.offset = rnd.randrange(len(self.brokers)) if self.brokers else 0
        self.taken = 0
        self.round = 0

    def next(self, round_no: int) -> int | None:
        if not self.brokers:
            return None
        if round_no != self.round:
            self.round = round_no
            self.taken = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.taken >= len(self.brokers):
            return None
        broker = self.brokers[(self.offset + self.taken) % len(self.brokers)]
        self.taken += 1
        return broker

    def shuffle(self, rnd: _random.Random) -> None:
        rnd.shuffle(self.brokers)


class _Rack:
    def __init__(self, unfenced: list[int], fenced: list[int], rnd: _random.Random):
        self.unfenced = _Cursor(unfenced, rnd)
        self.fenced = _Cursor(fenced, rnd)

    def next_unfenced(self, round_no: int) -> int | None:
        return self.unfenced.next(round_no)

    def next_any(self, round_no: int) -> int | None:
        broker = self.unfenced.next(round_no)
        return broker if broker is not None else self.fenced.next(round_no)


class _RackList:
    def __init__(self, brokers: Iterable[UsableBroker], rnd: _random.Random):
        self.rnd = rnd
        by_rack: dict[str | None, tuple[list[int], list[int]]] = {}
        self.num_total = self.num_unfenced = 0
        for b in brokers:
            unfenced, fenced = by_rack.setdefault(b.rack, ([], []))
            (fenced if b.fenced else unfenced).append(b.id)
            self.num_total += 1
            self.num_unfenced += 0 if b.fenced else 1
        self.racks = {name: _Rack(u, f, rnd) for name, (u, f) in by_rack.items()}
        # brokers without a rack sort first, as Kafka's Optional comparator does
        self.names: list[str | None] = sorted(by_rack, key=lambda n: (n is not None, n or ""))
        self.offset = rnd.randrange(len(self.names)) if self.names else 0
        self.round = 0

    def place(self, replication_factor: int) -> list[int]:
        _check(replication_factor, self.num_total, self.num_unfenced)
        if self.round == self.num_unfenced and self.num_unfenced > 1:
            self.rnd.shuffle(self.names)
            for rack in self.racks.values():
                rack.unfenced.shuffle(self.rnd)
                rack.fenced.shuffle(self.rnd)
            self.round = 0
        n = len(self.names)
        if self.offset >= n:
            self.offset = 0
        leader_rack = self.offset
        while True:  # the leader: the first unfenced broker from the current rack on
            leader = self.racks[self.names[leader_rack]].next_unfenced(self.round)
            if leader is not None:
                break
            leader_rack = (leader_rack + 1) % n
        replicas = [leader]
        rack_index, skip = self.offset, leader_rack
        while len(replicas) < replication_factor:
            broker = None
            while broker is None:
                if rack_index == skip:
                    skip = -1  # the leader's rack already gave one replica this pass
                else:
                    broker = self.racks[self.names[rack_index]].next_any(self.round)
                rack_index = (rack_index + 1) % n
            replicas.append(broker)
        self.round += 1
        self.offset += 1
        return replicas


def _check(replication_factor: int, num_total: int, num_unfenced: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )
    if num_unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")
    if replication_factor > num_total:
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{num_total} broker(s) are registered."
        )


class StripedReplicaPlacer:
    """``place(num_partitions, replication_factor, brokers) -> [[broker ids] per partition]``, leader
    first. Raises InvalidReplicationFactorError when the factor is not positive, exceeds the number of
    registered brokers, or every broker is fenced."""

    def __init__(self, random: _random.Random | None = None):
        self.random = random or _random.Random()

    def place(self, num_partitions: int, replication_factor: int, brokers: Iterable[UsableBroker]) -> list[list[int]]:
        racks = _RackList(brokers, self.random)
        _check(replication_factor, racks.num_total, racks.num_unfenced)
        return [racks.place(replication_factor) for _ in range(num_partitions)]
