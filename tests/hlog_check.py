#!/usr/bin/env python3
"""Reads benchlab's HdrHistogram interval logs (.hlog) with an independent implementation, the
Python port of HdrHistogram (the `hdrh` module), and checks every file against what benchlab
decoded from its records.

Usage: hlog_check.py DIR EXPECTED.json

EXPECTED.json maps each file name in DIR to benchlab's decode of the record's histogram:
{"count": n, "min_ns": .., "max_ns": .., "mean_ns": .., "interval_length_s": ..,
 "interval_max_ms": .., "buckets": [[value_ns, count], ...]}. Every file must be listed and every
listed file present. The buckets are the recorded values as each implementation iterates them
(each bucket's highest equivalent value and its count), so equal buckets mean the same histogram.

Prints one line per file and `checked N file(s) with hdrh: M differ`; exits 1 when any check
failed or no file was checked, 2 when the module is missing or the arguments are wrong.
"""

import json
import os
import sys

try:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
except ImportError as e:  # the venv lacks the package: the caller's setup is wrong, not the file
    print(f"hdrh is not importable ({e}): install the hdrhistogram package", file=sys.stderr)
    sys.exit(2)


def read_one(path):
    """The file's intervals as (histogram, start, length, max as written) and its legend."""
    reader = HistogramLogReader(path, HdrHistogram(1, 600_000_000_000, 3))
    intervals = []
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        intervals.append(h)
    reader.close()
    # The reader keeps no Interval_Max; take it from the one interval line.
    with open(path, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if not l.startswith("#")]
    return intervals, lines


def check_interval(h, line, want, want_start):
    """The problems of one interval (its histogram as hdrh read it and its line as written)."""
    problems = []
    start, length, written_max = (float(x) for x in line.split(",")[:3])
    got = {
        "count": h.get_total_count(),
        "min_ns": h.get_min_value(),
        "max_ns": h.get_max_value(),
        "mean_ns": h.get_mean_value(),
    }
    for key in ("count", "min_ns", "max_ns"):
        if got[key] != want[key]:
            problems.append(f"{key}: hdrh reads {got[key]}, benchlab decoded {want[key]}")
    # Both take the mean over bucket midpoints; only float summation order differs.
    if abs(got["mean_ns"] - want["mean_ns"]) > 1e-9 * max(1.0, want["mean_ns"]):
        problems.append(f"mean_ns: hdrh reads {got['mean_ns']}, benchlab decoded {want['mean_ns']}")
    # Interval_Max is the max in ms with 3 decimals (the Java writer's %.3f of max / 1e6).
    if abs(written_max - h.get_max_value() / 1e6) > 0.0005:
        problems.append(f"Interval_Max {written_max} is not hdrh's max {h.get_max_value()} ns in ms")
    if abs(written_max - want["interval_max_ms"]) > 1e-9:
        problems.append(f"Interval_Max {written_max}, expected {want['interval_max_ms']}")
    if abs(length - want["interval_length_s"]) > 0.0005 or abs(start - want_start) > 0.0005:
        problems.append(f"interval {start},{length}: expected {want_start:.3f},{want['interval_length_s']:.3f}")
    buckets = []
    for item in h.get_recorded_iterator():
        buckets.append([item.value_iterated_to, item.count_at_value_iterated_to])
    if buckets != want["buckets"]:
        diff = next((i for i, (a, b) in enumerate(zip(buckets, want["buckets"])) if a != b), None)
        problems.append(
            f"buckets differ: hdrh {len(buckets)}, benchlab {len(want['buckets'])}; first difference at {diff}"
        )
    return problems


def check(path, want):
    """The problems of one file, as text; empty when it matches. A file of one interval (a load
    window, a calls histogram) is expected as one decode starting at 0; a load's time series as
    {"intervals": [decode with "start_s", ...]}, one per interval line, in order."""
    intervals, lines = read_one(path)
    if not lines or not lines[0].startswith('"StartTimestamp"'):
        return [f"no legend line before the intervals: {lines[:1]}"]
    wanted = want["intervals"] if "intervals" in want else [dict(want, start_s=0.0)]
    if len(intervals) != len(wanted) or len(lines) - 1 != len(wanted):
        return [f"{len(intervals)} intervals ({len(lines) - 1} lines), expected {len(wanted)}"]
    problems = []
    for i, (h, line, w) in enumerate(zip(intervals, lines[1:], wanted)):
        problems += [f"interval {i}: {p}" if len(wanted) > 1 else p for p in check_interval(h, line, w, w["start_s"])]
    return problems


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    folder, expected_path = argv[1], argv[2]
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)
    files = sorted(n for n in os.listdir(folder) if n.endswith(".hlog"))
    passed = failed = 0
    for name in sorted(set(files) | set(expected)):
        if name not in expected:
            problems = ["a file benchlab did not expect"]
        elif name not in files:
            problems = ["missing"]
        else:
            problems = check(os.path.join(folder, name), expected[name])
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            passed += 1
            want = expected[name]
            if "intervals" in want:
                print(f"ok {name}: {len(want['intervals'])} intervals")
            else:
                print(f"ok {name}: count {want['count']}, min {want['min_ns']} ns, max {want['max_ns']} ns")
    print(f"checked {passed + failed} file(s) with hdrh: {failed} differ")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
