"""Per-listener security set-up from the broker config (Kafka's ``ChannelBuilders`` / ``SaslChannelBuilder``).

For each listener whose security protocol (``listener.security.protocol.map``) is SASL_PLAINTEXT or SASL_SSL,
a factory of :class:`~pykbroker.security.sasl_server_authenticator.SaslServerAuthenticator` with:

* the mechanisms of ``listener.name.<listener>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``
  (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; GSSAPI is not supported: it is dropped with a
  warning, and a SASL listener left without a mechanism is a ConfigException);
* PLAIN users from ``listener.name.<listener>.plain.sasl.jaas.config`` (the ``user_<name>="<password>"``
  options of a PlainLoginModule line), as Kafka's PlainServerCallbackHandler;
* SCRAM credentials looked up at each authentication through ``scram_credentials(user, mechanism)`` (the
  broker's cache of the metadata log's UserScramCredentialRecords);
* the session lifetime per mechanism (KIP-368): ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms``,
  else ``listener.name.<listener>.connections.max.reauth.ms``, else ``connections.max.reauth.ms`` (ms, 0: the
  session never expires and re-authentication is off);
* OAUTHBEARER tokens checked by the listener's validator (:func:`pykbroker.security.oauthbearer.validator_for_listener`:
  unsecured JWS, or OIDC against a JWKS), with the options of ``listener.name.<listener>.oauthbearer.sasl.jaas.config``
  (an OAuthBearerLoginModule line), built once per listener when the broker starts.

:func:`transport_factories` gives SSL and SASL_SSL listeners their TLS transport (``ssl_factory``). The
security protocol of a listener name comes from the map, so a listener named ``SASL_PLAINTEXT`` without a
map entry works too.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.security_configs import (
    CONNECTIONS_MAX_REAUTH_MS_CONFIG,
    SASL_ENABLED_MECHANISMS_CONFIG,
)
from pykbroker.config.config_def import ConfigException
from pykbroker.security.jaas import parse_jaas_config
from pykbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from pykbroker.security.scram import ScramSaslServer
from pykbroker.utils.logging import get_logger

_log = get_logger("ChannelBuilders")
OAUTHBEARER = "OAUTHBEARER"  # pykbroker.security.oauthbearer.MECHANISM (that module loads with a SASL listener)
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, OAUTHBEARER)


def _listener_value(originals: dict, listener: str, key: str, default=None):
    prefixed = originals.get(f"listener.name.{listener.lower()}.{key}")
    return prefixed if prefixed is not None else originals.get(key, default)


def max_reauth_ms(originals: dict, listener: str, mechanism: str) -> int:
    """``connections.max.reauth.ms`` of ``mechanism`` on ``listener`` (see the module docstring);
    ConfigException when it is not an integer (Kafka's LONG type); a negative value means 0."""
    key = CONNECTIONS_MAX_REAUTH_MS_CONFIG
    value = originals.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.{key}")
    if value is None:
        value = _listener_value(originals, listener, key, 0)
    try:
        return max(0, int(str(value).strip()))
    except ValueError:
        raise ConfigException(f"Invalid value {value} for configuration {key}: Not a number of type LONG") from None


def authenticator_factories(endpoints, originals: dict, scram_credentials, token_credentials=None) -> dict:
    """``{listener name: factory()}`` for the SASL listeners among ``endpoints`` (EndPoints);
    ``token_credentials(token id, mechanism)``: delegation token logins over SCRAM (KIP-48; None: refused)."""
    out = {}
    for ep in endpoints:
        protocol = ep.security_protocol
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            continue
        # The SASL servers (and OAUTHBEARER's JWT validation) load with the first SASL listener: a broker without
        # one never imports them (start-up time, issue 31).
        from pykbroker.security.oauthbearer import OAuthBearerSaslServer, validator_for_listener
        from pykbroker.security.plain import PlainSaslServer, users_from_jaas
        from pykbroker.security.sasl_server_authenticator import SaslServerAuthenticator

        listener = ep.listener_name
        raw = _listener_value(originals, listener, SASL_ENABLED_MECHANISMS_CONFIG, "GSSAPI")
        names = [m.strip() for m in (raw if isinstance(raw, list) else str(raw).split(",")) if m.strip()]
        mechanisms = [m for m in names if m in SUPPORTED_MECHANISMS]
        for m in names:
            if m not in SUPPORTED_MECHANISMS:
                _log.warning(f"SASL mechanism {m} of listener {listener} is not supported by pykbroker; ignored")
        if not mechanisms:
            raise ConfigException(
                f"Listener {listener} is SASL_PLAINTEXT but none of its sasl.enabled.mechanisms ({raw}) is supported "
                f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
        plain_users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            plain_users = users_from_jaas(_jaas_options(originals, listener, "PLAIN"))
        validator = None
        if OAUTHBEARER in mechanisms:
            try:
                validator = validator_for_listener(originals, listener, _jaas_options(originals, listener, OAUTHBEARER))
            except ValueError as e:
                raise ConfigException(f"Invalid OAUTHBEARER configuration of listener {listener}: {e}") from None

        def server_factory(mechanism: str, _users=plain_users, _validator=validator):
            if mechanism == "PLAIN":
                return PlainSaslServer(_users)
            if mechanism == OAUTHBEARER:
                return OAuthBearerSaslServer(_validator)
            return ScramSaslServer(mechanism, scram_credentials, token_credentials)

        reauth = {m: max_reauth_ms(originals, listener, m) for m in mechanisms}
        out[listener] = lambda _m=tuple(mechanisms), _f=server_factory, _r=reauth: SaslServerAuthenticator(
            list(_m), _f, _r
        )
    return out


def _jaas_options(originals: dict, listener: str, mechanism: str) -> dict[str, str]:
    """The options of ``listener.name.<listener>.<mechanism>.sasl.jaas.config``; ConfigException when it is
    missing or malformed (Kafka: no ``KafkaServer`` JAAS entry)."""
    jaas = originals.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config")
    if jaas is None:
        raise ConfigException(
            f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in the JAAS "
            f"configuration: set listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        )
    try:
        return parse_jaas_config(str(jaas)).options
    except ValueError as e:
        raise ConfigException(f"Invalid JAAS config of listener {listener}: {e}") from None


class ListenerSslFactory:
    """The server side of one TLS listener (Kafka's ``SslFactory`` in ``SERVER`` mode): called with each
    accepted socket, it wraps it in an SslTransportLayer with the listener's current SSLContext.
    :meth:`reconfigure` swaps the context (dynamic keystore/truststore update): new connections get the new
    certificate, connections already made keep theirs. ``certificate`` is the listener's own certificate
    (``keystore_certificate``), for the compatibility check of the next update.

    Threading: called on Processor threads; ``reconfigure`` on the metadata publisher's thread replaces
    one attribute (a single reference assignment, which a Processor sees whole)."""

    def __init__(self, listener: str, originals: dict):
        from pykbroker.security.ssl_factory import keystore_certificate, server_context

        self.listener = listener
        self.context = server_context(originals, listener)
        self.certificate = keystore_certificate(originals, listener)

    def __call__(self, sock):
        from pykbroker.network.ssl_transport import SslTransportLayer

        return SslTransportLayer(sock, self.context)

    def reconfigure(self, context, certificate) -> None:
        self.context, self.certificate = context, certificate


def transport_factories(endpoints, originals: dict) -> dict:
    """``{listener name: (transport factory, principal builder)}`` for SSL and SASL_SSL listeners: each
    accepted socket is wrapped in an SslTransportLayer with the listener's context (the factory is a
    :class:`ListenerSslFactory`); without SASL the principal comes from the client certificate
    (``ssl.principal.mapping.rules``)."""
    from pykbroker.security.ssl_factory import SslPrincipalMapper

    out = {}
    for ep in endpoints:
        if ep.security_protocol not in ("SSL", "SASL_SSL"):
            continue
        factory = ListenerSslFactory(ep.listener_name, originals)
        rules = _listener_value(originals, ep.listener_name, "ssl.principal.mapping.rules", "DEFAULT")
        mapper = SslPrincipalMapper(str(rules))
        builder = mapper.principal if ep.security_protocol == "SSL" else None
        out[ep.listener_name] = (factory, builder)
    return out
