#!/usr/bin/env bash
# kafka-delegation-tokens --bootstrap-server HOST:PORT --command-config FILE (--create --max-life-time-period MS [--renewer-principal User:B] [--owner-principal User:O] | --renew --hmac H --renew-time-period MS | --expire --hmac H --expiry-time-period MS | --describe [--owner-principal User:O])
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/_venv.sh" || exit 1
exec "$PYKBROKER_PY" -m pykbroker.tools.delegation_token_command "$@"
