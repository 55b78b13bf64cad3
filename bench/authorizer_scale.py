"""StandardAuthorizer.authorize() time against the number of ACLs (issue 30 benchmark).

    .venv/bin/python bench/authorizer_scale.py                      # this checkout only
    .venv/bin/python bench/authorizer_scale.py --before 62c7af0     # and a commit, in the same run

For each ACL count (10 / 10,000 / 100,000 by default: literal and prefixed, topics and groups, 5,000
principals, ALLOW and DENY, on resources unrelated to the ones asked about, plus a handful that decide them)
it times single ``authorize`` calls (up to ``--calls``, at least 50 when they take over 5 s) for a mix of
decisions (literal allow, prefixed deny, wildcard, implied DESCRIBE, no match) and prints the median in
microseconds per call, and the time the first call took (it builds the ACL index). ``--before REF`` exports
``REF`` with ``git archive`` into a temporary directory and runs the same measurement there in a subprocess,
so the two columns come from one run on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# codes: ResourceType TOPIC=2 GROUP=3; PatternType LITERAL=3 PREFIXED=4; AclOperation READ=3 WRITE=4 DESCRIBE=8
# ALL=2; AclPermissionType DENY=2 ALLOW=3 (Kafka's, as pykbroker.protocol defines them; numbers here so the
# same script runs against any pykbroker version)
_T, _G, _LIT, _PRE = 2, 3, 3, 4
_READ, _WRITE, _DESCRIBE, _ALL = 3, 4, 8, 2
_DENY, _ALLOW = 2, 3
_DECIDING = [
    (_T, "payments-", _PRE, "User:eve", "*", _ALL, _DENY),
    (_T, "payments-", _PRE, "User:*", "*", _READ, _ALLOW),
    (_T, "payments-ledger", _LIT, "User:frank", "*", _WRITE, _ALLOW),
    (_T, "*", _LIT, "User:ops", "*", _DESCRIBE, _ALLOW),
]
_QUERIES = [
    ("User:frank", _WRITE, _T, "payments-ledger"),  # literal allow
    ("User:eve", _READ, _T, "payments-ledger"),  # prefixed deny
    ("User:zoe", _DESCRIBE, _T, "payments-x"),  # prefixed User:* READ implies DESCRIBE
    ("User:ops", _DESCRIBE, _T, "orders"),  # wildcard
    ("User:zoe", _READ, _G, "some-group"),  # nothing matches
]


def _acls(count: int) -> dict:
    rng = random.Random(count)
    acls = {}
    for i in range(max(0, count - len(_DECIDING))):
        pattern = _PRE if i % 3 == 0 else _LIT
        name = f"team{i % 997}-svc{i}" + ("-" if pattern == _PRE else "")
        acls[uuid.UUID(int=rng.getrandbits(128))] = (
            rng.choice([_T, _G]), name, pattern, f"User:u{i % 5000}", "*",
            rng.choice([_READ, _WRITE, _DESCRIBE]), rng.choice([_ALLOW, _DENY]),
        )  # fmt: skip
    for binding in _DECIDING:
        acls[uuid.UUID(int=rng.getrandbits(128))] = binding
    return acls


def measure(counts: list[int], calls: int, budget: float = 5.0) -> dict[int, tuple[float, float]]:
    """``{count: (median µs per authorize call, ms of the first call)}`` with the importable pykbroker: up to
    ``calls`` timed calls per count, fewer (at least 50) when they take more than ``budget`` seconds."""
    from types import SimpleNamespace

    from pykbroker.metadata.standard_authorizer import StandardAuthorizer

    out = {}
    for count in counts:
        image = SimpleNamespace(acls=_acls(count))
        authorizer = StandardAuthorizer(lambda image=image: image, "User:admin", False)
        start = time.perf_counter()
        authorizer.authorize("User:frank", "10.0.0.1", _WRITE, _T, "payments-ledger")
        first_ms = (time.perf_counter() - start) * 1e3
        samples: list[float] = []
        deadline = time.perf_counter() + budget
        while len(samples) < calls and (len(samples) < 10 * len(_QUERIES) or time.perf_counter() < deadline):
            for principal, op, rtype, name in _QUERIES:
                start = time.perf_counter()
                authorizer.authorize(principal, "10.0.0.1", op, rtype, name)
                samples.append(time.perf_counter() - start)
        out[count] = (statistics.median(samples) * 1e6, first_ms)
    return out


def _before(ref: str, counts: list[int], calls: int) -> dict[int, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="authorizer-before-") as d:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=archive, check=True)
        result = subprocess.run(
            [sys.executable, __file__, "--json", "--calls", str(calls), "--acls", *map(str, counts)],
            env={**os.environ, "PYTHONPATH": d},
            cwd=d,
            check=True,
            capture_output=True,
            text=True,
        )
    return {int(k): tuple(v) for k, v in json.loads(result.stdout).items()}  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acls", type=int, nargs="+", default=[10, 10_000, 100_000])
    parser.add_argument("--calls", type=int, default=20_000, help="authorize calls per ACL count")
    parser.add_argument("--before", help="a git ref whose authorizer is measured too (git archive)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.acls, args.calls)))
        return
    sys.path.insert(0, str(ROOT))
    before = _before(args.before, args.acls, args.calls) if args.before else None
    after = measure(args.acls, args.calls)
    header = f"{'ACLs':>8}  {'after µs/call':>14}  {'after first call ms':>20}"
    if before:
        header += f"  {'before µs/call':>15}  {'before first call ms':>21}"
    print(header)
    for count in args.acls:
        line = f"{count:>8}  {after[count][0]:>14.2f}  {after[count][1]:>20.1f}"
        if before:
            line += f"  {before[count][0]:>15.2f}  {before[count][1]:>21.1f}"
        print(line)


if __name__ == "__main__":
    main()
