"""kafka-delegation-tokens: create, renew, expire and describe delegation tokens (Kafka's ``DelegationTokenCommand``,
KIP-48).

Flags and output as Kafka's: ``--bootstrap-server`` and ``--command-config`` (both required; token operations need a
SASL login, so the properties file carries ``security.protocol``, ``sasl.mechanism`` and ``sasl.jaas.config``
with ``username`` / ``password`` -- or librdkafka's ``sasl.username`` / ``sasl.password``), then exactly one of

* ``--create --max-life-time-period MS [--renewer-principal User:bob ...] [--owner-principal User:carol]``:
  ``Calling create token operation with renewers :[User:bob] , max-life-time-period :-1``, ``Created delegation
  token with tokenId : <id>`` and the token table;
* ``--renew --hmac B64 --renew-time-period MS`` (``Completed renew operation. New expiry date : ...``);
* ``--expire --hmac B64 --expiry-time-period MS`` (-1: at once; ``Completed expire operation. New expiry date : ...``);
* ``--describe [--owner-principal User:alice ...]``: ``Total number of tokens : N`` and the table.

The table has Kafka's columns ``TOKENID HMAC OWNER REQUESTER RENEWERS ISSUEDATE EXPIRYDATE MAXDATE`` (dates as
``yyyy-MM-dd'T'HH:mm`` in local time). A failed operation prints the Kafka exception (e.g.
``org.apache.kafka.common.errors.DelegationTokenNotFoundException: Delegation Token is not found on server.``) on
stderr and exits 1; bad arguments print the usage and exit 1. SSL and SASL_SSL take the ``ssl.*`` client keys.
"""

from __future__ import annotations

import base64
import binascii
import sys
import time

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import PLAINTEXT, SUPPORTED_CLIENT_MECHANISMS, ClientSecurity
from pykbroker.security.jaas import parse_jaas_config
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    client_properties,
    configure_tool_logging,
)

_HEADER = "%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s"


class CommandError(Exception):
    pass


def _date(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def _principal(text: str) -> tuple[str, str]:
    """``User:alice`` -> ("User", "alice") (Kafka's ``SecurityUtils.parseKafkaPrincipal``)."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise CommandError(f"expected a string in format principalType:principalName but got {text.strip()}")
    return kind, name


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def security_from_properties(props: dict[str, str]) -> ClientSecurity:
    """The ClientSecurity of an Admin client properties file (see the module docstring); CommandError when a
    SASL mechanism is unsupported or has no credentials."""
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        from pykbroker.security.ssl_factory import client_context

        context = client_context(props, "client")
    if protocol == "SSL":
        return ClientSecurity(protocol, context)
    mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_CLIENT_MECHANISMS:
        raise CommandError(
            f"sasl.mechanism {mechanism} is not supported (supported: {', '.join(SUPPORTED_CLIENT_MECHANISMS)})"
        )
    options: dict = {}
    if props.get("sasl.jaas.config"):
        options = dict(parse_jaas_config(props["sasl.jaas.config"]).options)
    username = options.get("username", props.get("sasl.username"))
    password = options.get("password", props.get("sasl.password"))
    if username is None or password is None:
        raise CommandError("The command config needs sasl.jaas.config with username and password options")
    token_auth = str(options.get("tokenauth", "false")).lower() == "true"
    return ClientSecurity(protocol, context, mechanism, str(username), str(password), token_auth=token_auth)


def _check(code: int) -> None:
    if code != errors.NONE:
        cls = errors.for_code(code)
        name = cls.__name__.removesuffix("Error") + "Exception"
        raise CommandError(f"org.apache.kafka.common.errors.{name}: {cls.default_message}")


def _print_tokens(tokens: list[dict], out) -> None:
    print("\n" + _HEADER % ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"),
          file=out)  # fmt: skip
    for t in tokens:
        renewers = _java_list([f"{r['principal_type']}:{r['principal_name']}" for r in t["renewers"]])
        owner = f"{t['principal_type']}:{t['principal_name']}"
        requester = f"{t['token_requester_principal_type']}:{t['token_requester_principal_name']}"
        hmac_b64 = base64.b64encode(bytes(t["hmac"])).decode()
        print("\n" + _HEADER % (t["token_id"], hmac_b64, owner, requester, renewers, _date(t["issue_timestamp"]),
                                _date(t["expiry_timestamp"]), _date(t["max_timestamp"])), file=out)  # fmt: skip


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CommandError(f"Illegal base64 character in --hmac {text}") from None


def _parser() -> ToolArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-delegation-tokens",
        description="This tool helps to create, renew, expire, or describe delegation tokens.",
    )
    p.add_argument("--bootstrap-server", help="REQUIRED: server(s) to use for bootstrapping.")
    p.add_argument(
        "--command-config",
        help="REQUIRED: A property file containing configs to be passed to Admin Client. Token management operations "
        "are allowed in secure mode only. This config file is used to pass security related configs.",
    )
    p.add_argument("--create", action="store_true", help="Create a new delegation token.")
    p.add_argument("--renew", action="store_true", help="Renew delegation token.")
    p.add_argument("--expire", action="store_true", help="Expire delegation token.")
    p.add_argument("--describe", action="store_true", help="Describe delegation tokens for the given principals.")
    p.add_argument("--owner-principal", action="append", help="owner is a Kafka principal (principalType:name).")
    p.add_argument("--renewer-principal", action="append", help="renewer is a Kafka principal (principalType:name).")
    p.add_argument(
        "--max-life-time-period", type=int, help="Max life period for the token in milliseconds (-1: server default)."
    )
    p.add_argument("--renew-time-period", type=int, help="Renew time period in milliseconds (-1: server default).")
    p.add_argument("--expiry-time-period", type=int, help="Expiry time period in milliseconds (-1: expire now).")
    p.add_argument("--hmac", help="HMAC of the delegation token")
    add_version_option(p)
    return p


def _check_args(p: ToolArgumentParser, args) -> None:
    """Kafka's ``DelegationTokenCommandOptions.checkArgs``."""
    if sum((args.create, args.renew, args.expire, args.describe)) != 1:
        p.error("Command must include exactly one action: --create, --renew, --expire or --describe")
    required = ["bootstrap_server", "command_config"]
    invalid: list[str] = []
    if args.create:
        required += ["max_life_time_period"]
        invalid = ["hmac", "renew_time_period", "expiry_time_period"]
    elif args.renew:
        required += ["hmac", "renew_time_period"]
        invalid = ["renewer_principal", "max_life_time_period", "expiry_time_period", "owner_principal"]
    elif args.expire:
        required += ["hmac", "expiry_time_period"]
        invalid = ["max_life_time_period", "renew_time_period", "owner_principal"]
    else:
        invalid = ["renew_time_period", "max_life_time_period", "hmac", "expiry_time_period"]
    for name in required:
        if getattr(args, name) is None:
            p.error(f'Missing required argument "[{name.replace("_", "-")}]"')
    action = next(a for a in ("create", "renew", "expire", "describe") if getattr(args, a))
    for name in invalid:
        if getattr(args, name) is not None:
            p.error(f'Option "[{action}]" can\'t be used with option "[{name.replace("_", "-")}]"')


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if out is sys.stdout:
        configure_tool_logging()
    p = _parser()
    args = p.parse_args(argv)
    _check_args(p, args)
    try:
        props = client_properties(args.command_config, {}, args.bootstrap_server)
        security = security_from_properties(props)
        with BrokerConnection.to(args.bootstrap_server, client_id="kafka-delegation-tokens", security=security) as conn:
            if args.create:
                renewers = [_principal(r) for r in args.renewer_principal or []]
                owners = [_principal(o) for o in args.owner_principal or []]
                print(f"Calling create token operation with renewers :{_java_list([':'.join(r) for r in renewers])} , "
                      f"max-life-time-period :{args.max_life_time_period}", file=out)  # fmt: skip
                body = {
                    "owner_principal_type": owners[0][0] if owners else None,
                    "owner_principal_name": owners[0][1] if owners else None,
                    "renewers": [{"principal_type": k, "principal_name": n} for k, n in renewers],
                    "max_lifetime_ms": args.max_life_time_period,
                }
                r = conn.request(ApiKeys.CREATE_DELEGATION_TOKEN, 3, body)
                _check(r["error_code"])
                print(f"Created delegation token with tokenId : {r['token_id']}", file=out)
                token = {
                    **{k: r[k] for k in ("principal_type", "principal_name", "token_id", "hmac")},
                    "token_requester_principal_type": r["token_requester_principal_type"],
                    "token_requester_principal_name": r["token_requester_principal_name"],
                    "issue_timestamp": r["issue_timestamp_ms"],
                    "expiry_timestamp": r["expiry_timestamp_ms"],
                    "max_timestamp": r["max_timestamp_ms"],
                    "renewers": body["renewers"],
                }
                _print_tokens([token], out)
            elif args.renew:
                print(f"Calling renew token operation with hmac :{args.hmac} , renew-time-period :"
                      f"{args.renew_time_period}", file=out)  # fmt: skip
                r = conn.request(
                    ApiKeys.RENEW_DELEGATION_TOKEN,
                    2,
                    {"hmac": _hmac(args.hmac), "renew_period_ms": args.renew_time_period},
                )
                _check(r["error_code"])
                print(f"Completed renew operation. New expiry date : {_date(r['expiry_timestamp_ms'])}", file=out)
            elif args.expire:
                print(f"Calling expire token operation with hmac :{args.hmac} , expire-time-period :"
                      f"{args.expiry_time_period}", file=out)  # fmt: skip
                r = conn.request(
                    ApiKeys.EXPIRE_DELEGATION_TOKEN,
                    2,
                    {"hmac": _hmac(args.hmac), "expiry_time_period_ms": args.expiry_time_period},
                )
                _check(r["error_code"])
                print(f"Completed expire operation. New expiry date : {_date(r['expiry_timestamp_ms'])}", file=out)
            else:
                owners = [_principal(o) for o in args.owner_principal or []]
                if not owners:
                    print("Calling describe token operation for current user.", file=out)
                else:
                    print(f"Calling describe token operation for owners: {_java_list([':'.join(o) for o in owners])}",
                          file=out)  # fmt: skip
                # Kafka's Admin sends null owners for an empty list: every token the principal may see
                body = {"owners": [{"principal_type": k, "principal_name": n} for k, n in owners] or None}
                r = conn.request(ApiKeys.DESCRIBE_DELEGATION_TOKEN, 3, body)
                _check(r["error_code"])
                print(f"Total number of tokens : {len(r['tokens'])}", end="", file=out)
                _print_tokens(r["tokens"], out)
    except (CommandError, errors.KafkaError, OSError, ValueError) as e:
        print(str(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
