"""The Processor hands a parsed request to the RequestChannel only once its receive pass is done (right
before it blocks in poll), with the request's connection already muted (Kafka's Processor mutes the
channel of every request it queues)."""

from __future__ import annotations

from pykbroker.network.channel import ChannelMuteState

from .harness import EchoServer, echo


def test_request_is_handed_over_with_its_connection_muted():
    with EchoServer() as s:
        processor = s.processor
        channel = processor.request_channel
        original = channel.send_request
        seen: list[tuple[ChannelMuteState, int]] = []

        def send_request(request):
            kchannel = processor.selector.channel(request.context.connection_id)
            seen.append((kchannel.mute_state, len(processor.selector.completed_receives)))
            original(request)

        channel.send_request = send_request
        clients = [s.connect() for _ in range(3)]
        try:
            for round_ in range(3):
                for i, sock in enumerate(clients):
                    echo(sock, round_ * 10 + i)
        finally:
            for sock in clients:
                sock.close()
        assert len(seen) == 9
        # muted before the handler can see it, and no receive of the poll left undispatched
        assert all(state is ChannelMuteState.MUTED_AND_RESPONSE_PENDING for state, _ in seen), seen
        assert all(pending == 0 for _, pending in seen), seen
