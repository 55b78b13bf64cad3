"""kafka-server-stop: orderly shutdown of running brokers (Kafka's ``bin/kafka-server-stop.sh``).

    bin/kafka-server-stop [--process-role=broker|controller] [--node-id=N]

Sends SIGTERM (or the signal named by the ``SIGNAL`` environment variable, as Kafka's script does) to
the pykbroker broker processes -- ``python -m pykbroker.kafka ...``, our ``kafka.Kafka``, also started as
``python -m pykbroker`` or by the installed ``kafka-server-start`` command -- of this user on this
machine (every user's when run as root). Without options every one of them is stopped. With
``--node-id N`` only those whose configuration has ``node.id=N``; with ``--process-role ROLE`` only
those whose ``process.roles`` include ROLE (a combined ``broker,controller`` node matches either).
Both given: Kafka's notice, and node id takes precedence. As in Kafka, the configuration is the
properties file named on the process' command line (a relative path is taken from the process' working
directory; none: the package's default configuration); unlike Kafka's script, ``--override`` values on
that command line count too. The value may follow the flag after ``=`` (Kafka's spelling) or as the
next argument.

Prints ``No kafka server to stop`` and exits 1 when no process matches; ``--help`` prints the usage
and stops nothing; an unknown argument prints the usage on stderr and exits 1 without stopping anything.
Process discovery reads ``/proc`` (Linux).
"""

from __future__ import annotations

import os
import signal
import sys

from pykbroker.config.broker_configs.kraft_configs import NODE_ID_CONFIG, PROCESS_ROLES_CONFIG
from pykbroker.config.broker_configs.server_configs import BROKER_ID_CONFIG
from pykbroker.config.properties import PropertiesError, load_properties

USAGE = """USAGE: kafka-server-stop [--process-role=broker|controller] [--node-id=N]
Stops (SIGTERM, or the signal named by $SIGNAL) the pykbroker brokers (python -m pykbroker.kafka) of this
user running on this machine.
  --process-role=ROLE  only the processes whose process.roles include ROLE (broker or controller)
  --node-id=N          only the process whose node.id is N (takes precedence over --process-role)
  --help               print this message and stop nothing"""

ENTRY_POINTS = ("pykbroker.kafka", "pykbroker")
CONSOLE_SCRIPT = "kafka-server-start"  # the installed command: python .../bin/kafka-server-start ...


def parse_args(argv: list[str]) -> tuple[str | None, str | None] | None:
    """``(process role, node id)``; None when ``--help`` was asked. SystemExit(1) on a bad argument."""
    role = node_id = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--help", "-h"):
            return None
        name, eq, value = a.partition("=")
        if name in ("--process-role", "--node-id"):
            if not eq:
                if i + 1 >= len(argv):
                    _bad(f"Option {name} requires a value")
                value = argv[i + 1]
                i += 1
            if name == "--process-role":
                role = value
            else:
                node_id = value
        else:
            _bad(f"Unrecognized option: {a}")
        i += 1
    if role is not None and role not in ("broker", "controller"):
        _bad(f"Invalid process role: {role} (expected broker or controller)")
    return role, node_id


def _bad(message: str):
    print(message, file=sys.stderr)
    print(USAGE, file=sys.stderr)
    raise SystemExit(1)


def broker_processes() -> list[tuple[int, list[str], str]]:
    """``(pid, argv after -m pykbroker.kafka, working directory)`` of this user's brokers (all when root)."""
    me, uid = os.getpid(), os.getuid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            if uid != 0 and os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
        except OSError:
            continue  # gone meanwhile
        args = _broker_args(argv)
        if args is None:
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        out.append((pid, args, cwd))
    return sorted(out)


def _broker_args(argv: list[str]) -> list[str] | None:
    """The arguments after ``-m pykbroker.kafka`` (``-m pykbroker``, the ``kafka-server-start`` script) when
    ``argv`` is a Python running our entry point."""
    if not argv or "python" not in os.path.basename(argv[0]):
        return None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return argv[i + 2 :] if i + 1 < len(argv) and argv[i + 1] in ENTRY_POINTS else None
        if a.startswith("-m") and a[2:] in ENTRY_POINTS:
            return argv[i + 1 :]
        if not a.startswith("-"):
            return argv[i + 1 :] if os.path.basename(a) == CONSOLE_SCRIPT else None  # another script: not ours
        if a.startswith("-c") or a.startswith("-m"):
            return None  # a command or another module: not our entry point
        i += 2 if a in ("-X", "-W") else 1
    return None


def process_config(args: list[str], cwd: str) -> dict[str, str]:
    """The process' configuration: its properties file plus its ``--override``s (OSError if unreadable)."""
    from pykbroker.config.server_properties import parse_args as broker_args

    path, overrides = broker_args(args)
    props = dict(load_properties(os.path.join(cwd, path)))
    props.update(overrides)
    return props


def matches(props: dict[str, str], role: str | None, node_id: str | None) -> bool:
    if node_id is not None:
        return props.get(NODE_ID_CONFIG, props.get(BROKER_ID_CONFIG, "")).strip() == node_id.strip()
    if role is not None:
        return role in [r.strip() for r in props.get(PROCESS_ROLES_CONFIG, "").split(",")]
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parsed = parse_args(argv)
    if parsed is None:
        print(USAGE)
        return 0
    role, node_id = parsed
    if role is not None and node_id is not None:
        print("When both node-id and process-role are provided, the value for node-id will take precedence")
    name = os.environ.get("SIGNAL", "TERM").upper()
    try:
        sig = signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
    except KeyError:
        print(f"Unknown signal: {name}", file=sys.stderr)
        return 1
    targets = []
    for pid, args, cwd in broker_processes():
        if role is not None or node_id is not None:
            try:
                props = process_config(args, cwd)
            except (OSError, PropertiesError, SystemExit) as e:
                print(f"Cannot read the configuration of process {pid} ({' '.join(args)}): {e}", file=sys.stderr)
                continue
            if not matches(props, role, node_id):
                continue
        targets.append(pid)
    if not targets:
        print("No kafka server to stop")
        return 1
    status = 0
    for pid in targets:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # exited meanwhile
        except OSError as e:
            print(f"kill {pid}: {e.strerror}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
