"""EmbeddedKafka start and restart time, in the benchmark process (README: "ready in a few tens of
milliseconds once imported").

    .venv/bin/python bench/embedded_start.py [--rounds 5]

Prints, per round, the wall time of ``EmbeddedKafka().start()`` (a fresh temporary data directory: the node
formats itself, elects itself controller, registers and publishes the first metadata) and of ``restart()``
(the same directory, logs recovered), then their medians. The first round also pays the imports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.testing import EmbeddedKafka


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    starts, restarts = [], []
    for i in range(args.rounds):
        kafka = EmbeddedKafka()
        t0 = time.perf_counter()
        kafka.start()
        starts.append(time.perf_counter() - t0)
        try:
            t0 = time.perf_counter()
            kafka.restart()
            restarts.append(time.perf_counter() - t0)
        finally:
            kafka.close()
        print(f"round {i + 1}: start {starts[-1] * 1000:.0f} ms, restart {restarts[-1] * 1000:.0f} ms")
    print(
        f"median over {args.rounds} rounds: start {statistics.median(starts) * 1000:.0f} ms, "
        f"restart {statistics.median(restarts) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
