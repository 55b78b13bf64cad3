"""The floor of a request's two thread hand-offs in this CPython, on this machine: no broker involved.

    .venv/bin/python bench/handoff_floor.py
    .venv/bin/python bench/handoff_floor.py --round-trips 50000 --repeat 5

Every request crosses two threads and back, as in Kafka: a Processor hands it to a request handler
(here: a lock release, as ``queue.SimpleQueue.put`` wakes a waiting getter) and blocks in
``epoll_wait``; the handler answers by writing the Processor's eventfd (as ``KSelector.wakeup``) and
blocks again. This script does exactly that and nothing else, with two bare threads, and reports per
round trip: wall time, CPU time of the process (user and system, all threads, ``getrusage``) and
context switches. Whatever a lone request costs the broker beyond this floor is its own work (parsing,
the log append, the response, metrics, socket reads and writes); the floor itself can only be
amortised, by one thread handing over several requests per wake-up (many connections per Processor).

Compare with ``bench/request_cost.py`` (broker CPU and context switches per request). Not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import threading
import time


def round_trips(n: int) -> dict:
    """Run ``n`` Processor -> handler -> Processor round trips; returns per-round-trip figures."""
    handler_lock = threading.Lock()
    handler_lock.acquire()  # held: the handler blocks acquiring it until the "Processor" releases it
    wakeup_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    epoll = select.epoll()
    epoll.register(wakeup_fd, select.EPOLLIN)

    def handler() -> None:
        for _ in range(n):
            handler_lock.acquire()
            os.eventfd_write(wakeup_fd, 1)

    thread = threading.Thread(target=handler, name="handler", daemon=True)
    thread.start()
    time.sleep(0.1)  # let the handler block first
    r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(n):
        handler_lock.release()
        while not epoll.poll(1.0):
            pass
        os.eventfd_read(wakeup_fd)
    w1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    thread.join(5)
    epoll.close()
    os.close(wakeup_fd)
    return {
        "wall_us": (w1 - w0) / n * 1e6,
        "user_us": (r1.ru_utime - r0.ru_utime) / n * 1e6,
        "sys_us": (r1.ru_stime - r0.ru_stime) / n * 1e6,
        "cs": (r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round-trips", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"# {os.cpu_count()} cores, switch interval {1000 * __import__('sys').getswitchinterval():.1f} ms")
    for i in range(args.repeat):
        r = round_trips(args.round_trips)
        print(
            f"run={i} round trips={args.round_trips}: wall {r['wall_us']:5.1f} us  "
            f"CPU {r['user_us'] + r['sys_us']:5.1f} us (user {r['user_us']:4.1f}, sys {r['sys_us']:4.1f})  "
            f"{r['cs']:4.2f} context switches",
            flush=True,
        )


if __name__ == "__main__":
    main()
