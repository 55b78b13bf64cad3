#!/usr/bin/env bash
# kafka-leader-election --bootstrap-server HOST:PORT --election-type PREFERRED|UNCLEAN (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/_venv.sh" || exit 1
exec "$PYKBROKER_PY" -m pykbroker.tools.leader_election_command "$@"
