"""SampledRate and SampledAvg (Kafka's ``Rate`` and ``Avg`` over one ``SampledStat`` window ring): the ring
they share, their figures on hand-computed samples, and both measured on the same random samples."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.utils.windowed_stats import SampledAvg, SampledRate, SampledStat


def test_both_stats_keep_one_window_ring_of_values_and_counts():
    rate, avg = SampledRate(3, 1000, 0), SampledAvg(3, 1000, 0)
    assert isinstance(rate, SampledStat) and isinstance(avg, SampledStat)
    for value, now in [(5, 0), (7, 400), (1, 1000), (2, 2500), (4, 3100), (8, 3999)]:
        rate.record(value, now)
        avg.record(value, now)
    # windows start at 0, 1000 and 2500 (3100 falls in it); the fourth (3999) reuses the first slot
    assert rate.starts == avg.starts == [3999, 1000, 2500]
    assert rate.values == avg.values == [8.0, 1.0, 6.0]
    assert rate.counts == avg.counts == [1, 1, 2]
    assert rate.current == avg.current == 0


def test_avg_is_the_mean_of_the_retained_windows():
    avg = SampledAvg(2, 30_000, 0)
    assert math.isnan(avg.measure(0))  # nothing recorded: NaN as Kafka's Avg
    avg.record(10, 0)
    avg.record(20, 10_000)
    avg.record(60, 30_000)  # the second window
    assert avg.measure(30_000) == 30.0
    assert avg.measure(60_000) == 60.0  # the first window (started at 0) is 60 s old: left out
    assert math.isnan(avg.measure(90_000))


def test_rate_unrecord_takes_back_from_the_current_window():
    rate = SampledRate(2, 1000, 0)
    rate.record(3000, 0)
    rate.unrecord(1000)
    assert rate.values == [2000.0] and rate.counts == [1]
    assert rate.measure(0) == 2000.0  # one full window counted at least


samples = st.lists(st.tuples(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 2500)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 5),
    window_ms=st.integers(1, 2000),
    records=samples,
    tail=st.integers(0, 20_000),
)
def test_rate_and_avg_agree_on_the_same_samples(n, window_ms, records, tail):
    """Recorded alike, the rate's retained sum over its window size and the average's retained mean are
    views of the same windows: sum = rate * size / 1000 = avg * retained count."""
    rate, avg = SampledRate(n, window_ms, 0), SampledAvg(n, window_ms, 0)
    now = 0
    for value, dt in records:
        now += dt
        rate.record(value, now)
        avg.record(value, now)
    assert (rate.starts, rate.values, rate.counts) == (avg.starts, avg.values, avg.counts)
    now += tail
    expire = n * window_ms
    retained = [i for i, start in enumerate(avg.starts) if now - start < expire]
    total = sum(avg.values[i] for i in retained)
    count = sum(avg.counts[i] for i in retained)
    mean = avg.measure(now)
    assert math.isnan(mean) if count == 0 else math.isclose(mean, total / count, rel_tol=1e-9, abs_tol=1e-9)
    size = rate.window_size_ms(now)
    assert size >= (n - 1) * window_ms
    if size > 0:  # one window, measured at its start: no elapsed time, the rate is 0
        assert math.isclose(rate.measure(now) * size / 1000.0, total, rel_tol=1e-9, abs_tol=1e-6)
    else:
        assert rate.measure(now) == 0.0
