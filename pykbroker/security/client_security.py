"""How this node connects to another node's listener (Kafka's ``ChannelBuilders.clientChannelBuilder`` for the
inter-broker and controller clients).

:class:`ClientSecurity` is the immutable recipe a client connection follows: the listener's security protocol,
for SSL/SASL_SSL a client ``ssl.SSLContext`` (:func:`~pykbroker.security.ssl_factory.client_context`), for
SASL_PLAINTEXT/SASL_SSL the mechanism and the credentials. :func:`client_security` builds it from the broker
config, as Kafka does:

* the listener is ``inter.broker.listener.name`` (replica fetchers, transaction markers, partition
  verification) or the first of ``controller.listener.names`` (Raft, registration, heartbeats, forwarding);
* the mechanism is ``sasl.mechanism.inter.broker.protocol`` / ``sasl.mechanism.controller.protocol``
  (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; anything else is a ConfigException at start-up);
* the credentials are the ``username`` and ``password`` options of the listener's JAAS line,
  ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (else ``sasl.jaas.config``), e.g.
  ``...PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";``;
  for OAUTHBEARER a token provider (:mod:`pykbroker.security.oauthbearer_login`: an unsecured JWS from
  ``unsecuredLoginStringClaim_sub``, or OAuth client credentials with
  ``sasl.login.callback.handler.class=...OAuthBearerLoginCallbackHandler``).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from pykbroker.config.config_def import ConfigException
from pykbroker.security.jaas import parse_jaas_config
from pykbroker.security.sasl_client import sasl_client
from pykbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS

SUPPORTED_CLIENT_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    #: OAUTHBEARER: ``() -> token`` (pykbroker.security.oauthbearer_login)
    token_provider: Callable[[], str] | None = field(default=None, compare=False)
    #: SCRAM: log in with a delegation token (the ``tokenauth=true`` extension; KIP-48)
    token_auth: bool = False

    def new_sasl_client(self):
        """A fresh SASL client state machine for one connection (PlainSaslClient / ScramSaslClient /
        OAuthBearerSaslClient)."""
        assert self.sasl_mechanism is not None
        if self.token_provider is not None:
            from pykbroker.security.oauthbearer_login import OAuthBearerSaslClient

            return OAuthBearerSaslClient(self.token_provider())
        return sasl_client(self.sasl_mechanism, self.username, self.password, self.token_auth)

    def transport_factory(self, host: str):
        """``factory(sock) -> SslTransportLayer`` (client side, verifying ``host``), or None without TLS."""
        if self.ssl_context is None:
            return None
        from pykbroker.network.ssl_transport import SslTransportLayer

        context = self.ssl_context
        return lambda sock: SslTransportLayer(sock, context, server_side=False, server_hostname=host)

    def wrap_blocking(self, sock: socket.socket, host: str) -> socket.socket:
        """The blocking TLS handshake of a blocking client socket (bounded by the socket's timeout)."""
        if self.ssl_context is None:
            return sock
        return self.ssl_context.wrap_socket(sock, server_hostname=host)

    def __repr__(self) -> str:  # never the password
        return f"ClientSecurity({self.protocol}, mechanism={self.sasl_mechanism}, username={self.username!r})"


PLAINTEXT = ClientSecurity()


def client_security(originals: dict, listener: str, protocol: str, mechanism_key: str) -> ClientSecurity:
    """The ClientSecurity for connections to ``listener`` (security ``protocol``), with the SASL mechanism
    named by the config key ``mechanism_key``. ConfigException for unsupported or missing settings."""
    from pykbroker.security.ssl_factory import client_context

    protocol = protocol.upper()
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    context = client_context(originals, listener) if protocol in ("SSL", "SASL_SSL") else None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, context)
    mechanism = str(originals.get(mechanism_key) or "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_CLIENT_MECHANISMS:
        raise ConfigException(
            f"{mechanism_key}={mechanism} is not supported by pykbroker for listener {listener} "
            f"(supported: {', '.join(SUPPORTED_CLIENT_MECHANISMS)})"
        )
    jaas = originals.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config") or originals.get(
        "sasl.jaas.config"
    )
    if jaas is None:
        raise ConfigException(
            f"Listener {listener} uses {mechanism} between nodes: set "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config with username and password"
            + (
                " (OAUTHBEARER: unsecuredLoginStringClaim_sub, or clientId and clientSecret)"
                if mechanism == "OAUTHBEARER"
                else ""
            )
        )
    try:
        options = parse_jaas_config(str(jaas)).options
    except ValueError as e:
        raise ConfigException(f"Invalid JAAS config of listener {listener}: {e}") from None
    if mechanism == "OAUTHBEARER":
        from pykbroker.security.oauthbearer import listener_value
        from pykbroker.security.oauthbearer_login import token_provider

        try:
            provider = token_provider(lambda key: listener_value(originals, listener, key), options)
        except ValueError as e:
            raise ConfigException(f"OAUTHBEARER login of listener {listener}: {e}") from None
        return ClientSecurity(protocol, context, mechanism, token_provider=provider)
    if "username" not in options or "password" not in options:
        raise ConfigException(
            f"The JAAS config of listener {listener} for {mechanism} needs username and password options "
            "(the credentials this node authenticates with)"
        )
    return ClientSecurity(protocol, context, mechanism, str(options["username"]), str(options["password"]))
