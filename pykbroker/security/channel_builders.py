"""Per-listener security set-up from the broker config (Kafka's ``ChannelBuilders`` / ``SaslChannelBuilder``).

For each listener whose security protocol (``listener.security.protocol.map``) is SASL_PLAINTEXT, a factory of
:class:`~pykbroker.security.sasl_server_authenticator.SaslServerAuthenticator` with:

* the mechanisms of ``listener.name.<listener>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``
  (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; GSSAPI and OAUTHBEARER are not supported: they are dropped with a
  warning, and a SASL listener left without a mechanism is a ConfigException);
* PLAIN users from ``listener.name.<listener>.plain.sasl.jaas.config`` (the ``user_<name>="<password>"``
  options of a PlainLoginModule line), as Kafka's PlainServerCallbackHandler;
* SCRAM credentials looked up at each authentication through ``scram_credentials(user, mechanism)`` (the
  broker's cache of the metadata log's UserScramCredentialRecords).

SSL and SASL_SSL listeners are refused (ConfigException): TLS is not implemented yet. The security protocol
of a listener name comes from the map, so a listener named ``SASL_PLAINTEXT`` without a map entry works too.
"""

from __future__ import annotations

from pykbroker.config.config_def import ConfigException
from pykbroker.security.jaas import parse_jaas_config
from pykbroker.security.plain import PlainSaslServer, users_from_jaas
from pykbroker.security.sasl_server_authenticator import SaslServerAuthenticator
from pykbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from pykbroker.security.scram import ScramSaslServer
from pykbroker.utils.logging import get_logger

_log = get_logger("ChannelBuilders")
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


def _listener_value(originals: dict, listener: str, key: str, default=None):
    prefixed = originals.get(f"listener.name.{listener.lower()}.{key}")
    return prefixed if prefixed is not None else originals.get(key, default)


def authenticator_factories(endpoints, originals: dict, scram_credentials) -> dict:
    """``{listener name: factory()}`` for the SASL listeners among ``endpoints`` (EndPoints)."""
    out = {}
    for ep in endpoints:
        protocol = ep.security_protocol
        if protocol in ("SSL", "SASL_SSL"):
            raise ConfigException(
                f"Listener {ep.listener_name} uses {protocol}: TLS listeners are not supported by pykbroker yet"
            )
        if protocol != "SASL_PLAINTEXT":
            continue
        listener = ep.listener_name
        raw = _listener_value(originals, listener, "sasl.enabled.mechanisms", "GSSAPI")
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
            jaas = originals.get(f"listener.name.{listener.lower()}.plain.sasl.jaas.config")
            if jaas is None:
                raise ConfigException(
                    f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in the JAAS "
                    f"configuration: set listener.name.{listener.lower()}.plain.sasl.jaas.config"
                )
            try:
                plain_users = users_from_jaas(parse_jaas_config(str(jaas)).options)
            except ValueError as e:
                raise ConfigException(f"Invalid JAAS config of listener {listener}: {e}") from None

        def server_factory(mechanism: str, _users=plain_users):
            if mechanism == "PLAIN":
                return PlainSaslServer(_users)
            return ScramSaslServer(mechanism, scram_credentials)

        out[listener] = lambda _m=tuple(mechanisms), _f=server_factory: SaslServerAuthenticator(list(_m), _f)
    return out
