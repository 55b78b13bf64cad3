"""Share groups (KIP-932) against a real broker: a confluent_kafka ShareConsumer (librdkafka's ShareGroupHeartbeat
v1) joins, gets the subscribed partitions from the server-side simple assignor, leaves on close, and is fenced when
its session expires; ShareGroupDescribe, ListGroups (type share), DescribeGroups and DeleteGroups of share groups;
a share group id is of one type only; the group survives a broker restart (its records in __consumer_offsets)."""

from __future__ import annotations

import threading

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

#: short session timeouts (the broker's bounds lowered so that the group config may go down too)
SHORT = {
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "3000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
}


def describe(bootstrap: str, group: str) -> dict:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    return r["groups"][0]


def assigned(described: dict) -> dict[str, list[tuple[str, int]]]:
    return {
        m["member_id"]: sorted(
            (tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]
        )
        for m in described["members"]
    }


class Polling:
    """A ShareConsumer polled on its own thread (the client heartbeats from its background thread, but the
    application must keep polling); ``close()`` leaves the group."""

    def __init__(self, bootstrap: str, group: str, topics: list[str]):
        from confluent_kafka import ShareConsumer

        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.consumer.subscribe(topics)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.consumer.poll(0.2)
            except Exception:  # noqa: BLE001 - the data path's errors are not what these tests look at
                self._stop.wait(0.2)

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close()


@pytest.fixture
def share_broker(broker_factory):
    return broker_factory(**SHORT)


def test_share_consumers_join_share_the_partitions_and_leave(share_broker):
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "sq", partitions=4)
    first = Polling(bootstrap, "sg", ["sq"])
    try:
        wait_until(
            lambda: describe(bootstrap, "sg")["error_code"] == 0 and len(describe(bootstrap, "sg")["members"]) == 1,
            20,
            message="first member joined",
        )
        wait_until(
            lambda: list(assigned(describe(bootstrap, "sg")).values()) == [[("sq", p) for p in range(4)]],
            20,
            message="all 4 partitions to the only member",
        )
        group = describe(bootstrap, "sg")
        assert group["group_state"] == "Stable" and group["assignor_name"] == "simple"
        second = Polling(bootstrap, "sg", ["sq"])
        try:

            def balanced() -> bool:
                a = assigned(describe(bootstrap, "sg"))
                return (
                    len(a) == 2
                    and all(len(ps) == 2 for ps in a.values())
                    and sorted(p for ps in a.values() for p in ps) == [("sq", p) for p in range(4)]
                )

            wait_until(balanced, 20, message="two members with 2 partitions each")
        finally:
            second.close()
        wait_until(lambda: len(describe(bootstrap, "sg")["members"]) == 1, 20, message="the closed member left")
        wait_until(
            lambda: list(assigned(describe(bootstrap, "sg")).values()) == [[("sq", p) for p in range(4)]],
            20,
            message="all partitions back to the remaining member",
        )
    finally:
        first.close()
    wait_until(lambda: describe(bootstrap, "sg")["group_state"] == "Empty", 20, message="group empty")
