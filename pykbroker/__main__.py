"""``python -m pykbroker [-daemon] [server.properties] [--override property=value]*``: the broker
(:mod:`pykbroker.kafka`); without a file, the package's single-node configuration."""

import sys

from pykbroker.kafka import main

if __name__ == "__main__":
    sys.exit(main())
