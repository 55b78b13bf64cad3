"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932; Kafka's
``GroupCoordinatorService.describeShareGroupOffsets`` / ``alterShareGroupOffsets`` / ``deleteShareGroupOffsets``).

A share group has no committed offsets: the progress of each share partition (its start offset, the state of its
in-flight records) is the Persister's (:mod:`pykbroker.coordinator.share.persister`). The group coordinator only
knows which topics' share-partition state may exist (``ShareGroup.state_topics``, record 15), and asks the
Persister:

- describe: ``read_summary`` of each partition asked for (all of ``state_topics`` when the request names no
  topics): its start offset and leader epoch; -1 when the partition has no state yet (nothing consumed);
  GROUP_ID_NOT_FOUND for a missing group or one that is not a share group; UNKNOWN_TOPIC_OR_PARTITION for a topic or
  partition that does not exist. Version 1 (KIP-1226) adds ``lag``: the partition's latest offset (high watermark,
  from ``latest_offsets``, the broker's PartitionMetadataClient) minus the start offset minus the summary's delivery
  complete count (offsets above the start offset already acknowledged or archived), as Kafka's
  GroupCoordinatorService computes it; -1 when the start offset or the count is unknown (no state yet, a Kafka 4.1
  writer); a partition whose latest offset could not be read gets that error (LEADER_NOT_AVAILABLE,
  REQUEST_TIMED_OUT, NETWORK_EXCEPTION or the leader's ListOffsets error) and no offsets;
- alter (the group must have no member: NON_EMPTY_GROUP): ``initialize_state`` of each partition with a new state
  epoch (the summary's plus one) and the given start offset: the share partition, when next used, reads the new
  state and forgets its in-flight records (as Kafka: the state epoch fences the old state's writers);
- delete (the group must have no member): ``delete_state`` of every partition of each topic; the topics leave
  ``state_topics``.

Errors of the Persister are answered per partition (alter) or per topic (delete). Threading: the group's state is
read and changed under ``GroupMetadata.lock``; the Persister's futures complete on its threads (or at once), and
the response is sent by whichever completes last, never under a group lock.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future

from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState
from pykbroker.coordinator.group.share.group import ShareGroup
from pykbroker.protocol import errors
from pykbroker.protocol.types import ZERO_UUID


def gather_futures(futures: list[Future], done: Callable[[list], None]) -> None:
    """``done(results in order)`` once every future completed (at once when there is none); a future that raised
    gives None (callers answer it as UNKNOWN_SERVER_ERROR or retry it). Threading: ``done`` runs on the thread that
    completed the last future, or on the caller's when there is none."""
    if not futures:
        done([])
        return
    results: list = [None] * len(futures)
    remaining = [len(futures)]
    lock = threading.Lock()

    def one(i: int, f: Future) -> None:
        try:
            results[i] = f.result()
        except Exception:  # noqa: BLE001 - a Persister bug: answered as an unknown server error
            results[i] = None
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            done(results)

    def callback_for(i: int) -> Callable[[Future], None]:
        return lambda f: one(i, f)

    for i, f in enumerate(futures):
        f.add_done_callback(callback_for(i))


class ShareGroupOffsets:
    """The admin offsets APIs of share groups over a Persister (see module doc). ``share``: the coordinator's
    ShareGroupHeartbeatHandler (its manager, image and ``persist``); ``persister``: a
    :class:`~pykbroker.coordinator.share.persister.Persister`."""

    def __init__(self, share, persister):
        self.share = share
        self.persister = persister
        #: ``latest_offsets([(topic, partition)])`` -> Future of ``{(topic, partition): offset or -1}``: the high
        #: watermarks for the lag (set by the broker; without it every lag is -1)
        #: (offset, error code) per partition
        self.latest_offsets: (
            Callable[[list[tuple[str, int]]], Future[dict[tuple[str, int], tuple[int, int]]]] | None
        ) = None

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return self.share._topics()

    def _share_group(self, group_id: str) -> tuple[GroupMetadata, ShareGroup]:
        """The group's holder and ShareGroup; GroupIdNotFoundError when missing or not a share group (the
        partition's status is raised)."""
        holder = self.share.manager.get_group(group_id)
        if holder is None or holder.state is GroupState.DEAD:
            raise errors.GroupIdNotFoundError(f"Group {group_id} not found.")
        group = holder.share_group
        if group is None or group.dead:
            raise errors.GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        return holder, group

    # -- DescribeShareGroupOffsets -------------------------------------------------------------------------
    def describe(
        self, group_id: str, topics: list[dict] | None, respond: Callable[[dict], None], with_lag: bool = False
    ) -> None:
        """One group of DescribeShareGroupOffsets: ``respond(the group's response entry)``; ``with_lag`` (version 1)
        asks ``latest_offsets`` for the partitions' high watermarks to fill ``lag`` (else -1)."""
        try:
            holder, group = self._share_group(group_id)
        except errors.KafkaError as e:
            return respond({"group_id": group_id, "topics": [], "error_code": e.code, "error_message": str(e) or None})
        existing = self._topics()
        with holder.lock:
            wanted: list[tuple[str, uuid.UUID | None, list[int]]]
            if topics is None:
                wanted = [(name, tid, sorted(parts)) for tid, (name, parts) in group.state_topics.items()]
                wanted.sort(key=lambda w: w[0])
            else:
                wanted = []
                for t in topics:
                    tid = existing.get(t["topic_name"], (None, 0))[0]
                    wanted.append((t["topic_name"], tid, list(t["partitions"])))
        entries: list[tuple[str, uuid.UUID | None, int, bool]] = []
        futures: list[Future] = []
        for name, tid, parts in wanted:
            count = existing.get(name, (None, 0))[1] if tid is not None else 0
            for p in parts:
                known = tid is not None and 0 <= p < count
                entries.append((name, tid, p, known))
                if known:
                    assert tid is not None
                    futures.append(self.persister.read_summary(group_id, tid, p, -1))

        def done(results: list) -> None:
            by_topic: dict[str, dict] = {}
            lags: list[tuple[dict, str, int, int]] = []  # (partition entry, topic, start offset + complete count)
            it = iter(results)
            for name, tid, p, known in entries:
                topic = by_topic.setdefault(name, {"topic_name": name, "topic_id": tid or ZERO_UUID, "partitions": []})
                if not known:
                    topic["partitions"].append(
                        {
                            "partition_index": p,
                            "start_offset": -1,
                            "leader_epoch": -1,
                            "lag": -1,
                            "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                            "error_message": "This server does not host this topic-partition.",
                        }
                    )
                    continue
                summary = next(it)
                leader_epoch = -1
                if summary is None:
                    entry = (-1, errors.UNKNOWN_SERVER_ERROR)
                elif summary.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION:
                    entry = (-1, errors.NONE)  # no state yet: nothing consumed
                else:
                    entry = (summary.start_offset, summary.error_code)
                    leader_epoch = summary.leader_epoch
                out = {
                    "partition_index": p,
                    "start_offset": entry[0],
                    "leader_epoch": leader_epoch,
                    "lag": -1,
                    "error_code": entry[1],
                    "error_message": None,
                }
                topic["partitions"].append(out)
                if (
                    with_lag
                    and summary is not None
                    and entry[1] == errors.NONE
                    and summary.start_offset >= 0
                    and summary.delivery_complete_count >= 0
                ):
                    lags.append((out, name, p, summary.start_offset + summary.delivery_complete_count))
            result = {"group_id": group_id, "topics": list(by_topic.values()), "error_code": 0, "error_message": None}
            if not lags or self.latest_offsets is None:
                respond(result)
                return
            try:
                latest = self.latest_offsets([(name, p) for _, name, p, _ in lags])
            except Exception:  # noqa: BLE001 - no lag rather than no answer
                respond(result)
                return

            def with_latest(f: Future) -> None:
                try:
                    offsets = f.result()
                except Exception:  # noqa: BLE001 - an unreachable leader: the lag stays unknown
                    offsets = {}
                for out, name, p, done_below in lags:
                    hwm, code = offsets.get((name, p), (-1, errors.UNKNOWN_SERVER_ERROR))
                    if code == errors.NONE:
                        out["lag"] = hwm - done_below
                    else:  # Kafka: the partition answers the error, its other fields left at their defaults
                        out.update(start_offset=0, leader_epoch=0, error_code=code, error_message=errors.name_of(code))
                respond(result)

            latest.add_done_callback(with_latest)

        gather_futures(futures, done)
        return None

    def _empty_share_group(self, group_id: str) -> tuple[GroupMetadata, ShareGroup]:
        holder, group = self._share_group(group_id)
        with holder.lock:
            if group.members:
                raise errors.GroupNotEmptyError(
                    f"Share group {group_id} is not empty: its offsets can be changed only without members."
                )
        return holder, group

    # -- AlterShareGroupOffsets ----------------------------------------------------------------------------
    def alter(self, group_id: str, topics: list[dict], respond: Callable[[dict], None]) -> None:
        """AlterShareGroupOffsets: ``respond(response fields, no throttle time)``. Top-level errors
        GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (and the partition's status) are raised as KafkaErrors."""
        holder, group = self._empty_share_group(group_id)
        existing = self._topics()
        plan: list[tuple[str, uuid.UUID | None, int, int]] = []
        for t in topics:
            tid, count = existing.get(t["topic_name"], (None, 0))
            for p in t["partitions"]:
                ok = tid is not None and 0 <= p["partition_index"] < count
                plan.append((t["topic_name"], tid if ok else None, p["partition_index"], p["start_offset"]))
        summaries = [self.persister.read_summary(group_id, tid, p, -1) for _, tid, p, _ in plan if tid is not None]

        def summarized(results: list) -> None:
            it = iter(results)
            inits: list[Future] = []
            for _, tid, p, offset in plan:
                if tid is None:
                    continue
                summary = next(it)
                epoch = summary.state_epoch + 1 if summary is not None and summary.state_epoch >= 0 else 1
                inits.append(self.persister.initialize_state(group_id, tid, p, epoch, offset))
            gather_futures(inits, initialized)

        def initialized(codes: list) -> None:
            by_topic: dict[str, dict] = {}
            it = iter(codes)
            with holder.lock:
                for name, tid, p, _ in plan:
                    topic = by_topic.setdefault(
                        name, {"topic_name": name, "topic_id": tid or ZERO_UUID, "partitions": []}
                    )
                    if tid is None:
                        code, message = errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic-partition does not exist."
                    else:
                        topic["topic_id"] = tid
                        result = next(it)
                        code = errors.UNKNOWN_SERVER_ERROR if result is None else result
                        message = None
                        if code == errors.NONE:
                            group.add_state_partitions(tid, name, [p])
                    topic["partitions"].append({"partition_index": p, "error_code": code, "error_message": message})
                response = {"error_code": 0, "error_message": None, "responses": list(by_topic.values())}
                self.share.persist(holder, group, lambda code: respond(response))

        gather_futures(summaries, summarized)

    # -- DeleteShareGroupOffsets ---------------------------------------------------------------------------
    def delete(self, group_id: str, topics: list[dict], respond: Callable[[dict], None]) -> None:
        """DeleteShareGroupOffsets: ``respond(response fields, no throttle time)``; top-level errors as
        :meth:`alter`'s. A topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION."""
        holder, group = self._empty_share_group(group_id)
        existing = self._topics()
        plan: list[tuple[str, uuid.UUID | None, list[int]]] = []
        with holder.lock:
            for t in topics:
                name = t["topic_name"]
                tid, count = existing.get(name, (None, 0))
                if tid is None:
                    plan.append((name, None, []))
                    continue
                known = group.state_topics.get(tid, (name, set()))[1]
                plan.append((name, tid, sorted(known | set(range(count)))))
        futures = [self.persister.delete_state(group_id, tid, p) for _, tid, parts in plan if tid for p in parts]

        def deleted(codes: list) -> None:
            it = iter(codes)
            out = []
            with holder.lock:
                for name, tid, parts in plan:
                    if tid is None:
                        out.append(
                            {
                                "topic_name": name,
                                "topic_id": ZERO_UUID,
                                "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                                "error_message": "The topic does not exist.",
                            }
                        )
                        continue
                    results = [next(it) for _ in parts]
                    bad = [c if c is not None else errors.UNKNOWN_SERVER_ERROR for c in results if c != errors.NONE]
                    if not bad:
                        group.state_topics.pop(tid, None)
                    out.append(
                        {
                            "topic_name": name,
                            "topic_id": tid,
                            "error_code": bad[0] if bad else errors.NONE,
                            "error_message": None,
                        }
                    )
                response = {"error_code": 0, "error_message": None, "responses": out}
                self.share.persist(holder, group, lambda code: respond(response))

        gather_futures(futures, deleted)

    def delete_group_state(self, group_id: str, state_topics: dict[uuid.UUID, tuple[str, set[int]]]) -> None:
        """A share group was deleted (DeleteGroups): forget its share partitions' state (fire and forget)."""
        for tid, (_, parts) in state_topics.items():
            for p in parts:
                self.persister.delete_state(group_id, tid, p)
