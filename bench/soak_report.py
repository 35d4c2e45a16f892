#!/usr/bin/env python3
"""Summarises bench/soak_bench.sh's samples: acceptance per durability, the JSON and a PNG.

soak_report.py drains.jsonl samples.jsonl load minutes max_age cleanup producers out.json out.png
              [warmup_minutes]
Samples of the warm-up (elapsed_min <= warmup_minutes) are kept and plotted, marked "warmup",
and left out of the verdict.
The plot is drawn by gnuplot (four panels, one line per durability).
"""
import json
import os
import platform
import subprocess
import sys
import tempfile

drains_f, samples_f, load, minutes, max_age, cleanup, producers, out, png = sys.argv[1:10]
warmup = float(sys.argv[10]) if len(sys.argv) > 10 else 0.0
drains = [json.loads(l) for l in open(drains_f) if l.strip()]
samples = [json.loads(l) for l in open(samples_f) if l.strip()]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return round(sum(xs) / len(xs), 1) if xs else None


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return round(xs[len(xs) // 2], 1) if xs else None


def verdict(rows, producer_rate):
    """First 5 vs last 5 samples, and the table's size against the middle third's largest."""
    first, last = rows[:5], rows[-5:]
    sent_first, sent_last = mean([r["sent_in_window"] for r in first]), mean(
        [r["sent_in_window"] for r in last])
    rate_first, rate_last = mean([r["sent_per_s"] for r in first]), mean(
        [r["sent_per_s"] for r in last])
    # The p99 of five minutes lies within its minutes' p99s and near the typical one: one minute
    # with a stall moves their mean, not the five minutes' p99, so the median is compared.
    p99_first, p99_last = median([r["p99_ms"] for r in first]), median(
        [r["p99_ms"] for r in last])
    p99_mean_first, p99_mean_last = mean([r["p99_ms"] for r in first]), mean(
        [r["p99_ms"] for r in last])
    size = [(r["heap_bytes"] or 0) + (r["index_bytes"] or 0) for r in rows]
    third = max(1, len(rows) // 3)
    middle_max = max(size[third:2 * third] or size)
    last_max = max(size[-5:])
    sent_ratio = sent_last / sent_first if sent_first else None
    p99_ratio = p99_last / p99_first if p99_first else None
    return {
        "sent_per_s_first5": rate_first, "sent_per_s_last5": rate_last,
        "sent_ratio_last_to_first": round(sent_ratio, 3) if sent_ratio else None,
        "p99_ms_first5_median": p99_first, "p99_ms_last5_median": p99_last,
        "p99_ms_first5_mean": p99_mean_first, "p99_ms_last5_mean": p99_mean_last,
        "p99_ratio_last_to_first": round(p99_ratio, 3) if p99_ratio else None,
        "table_and_index_mb_middle_max": round(middle_max / 2**20, 1),
        "table_and_index_mb_last5_max": round(last_max / 2**20, 1),
        "size_ratio_last_to_middle": round(last_max / middle_max, 3) if middle_max else None,
        "throughput_flat": sent_ratio is not None and abs(sent_ratio - 1) <= 0.10,
        # Flat: no worse by more than 10 % (or 5 ms, the poll timer's noise); better is flat too.
        "p99_flat": p99_ratio is not None and (p99_ratio <= 1.10 or p99_last - p99_first <= 5),
        "size_bounded": middle_max > 0 and last_max <= 1.10 * middle_max,
        "pending_last5_max": max(r["pending"] or 0 for r in last),
        # Keeping up: at most five seconds of production waiting at any sample of the last five.
        "keeps_up": max(r["pending"] or 0 for r in last) <= 5 * producer_rate,
    }


by_mode = {}
for d in drains:  # per durability: the idle drain, then the drain under inserts at that rate
    by_mode.setdefault(d["fsync"], {}).update(d)
modes = []
for mode, d in by_mode.items():
    rows = [r for r in samples if r["fsync"] == mode]
    for r in rows:
        r["warmup"] = r["elapsed_min"] <= warmup
    judged = [r for r in rows if not r["warmup"]]
    if judged:
        modes.append({"fsync": mode, "idle_drain_rows_per_s": d.get("drain_rows_per_s"),
                      "loaded_drain_rows_per_s": d.get("loaded_drain_rows_per_s"),
                      "producer_rows_per_s": int(d.get("loaded_drain_rows_per_s", 0) * float(load)),
                      "verdict": verdict(judged,
                                         d.get("loaded_drain_rows_per_s", 0) * float(load)),
                      "samples": rows})

cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
result = {
    "benchmark": "soak: steady producers at a share of the drain rate, retention AGE on, "
                 "PostgreSQL -> HTTP (nginx 204) at QueueBox's defaults",
    "load": float(load), "minutes": int(minutes), "warmup_minutes": warmup,
    "producers": int(producers),
    "retention": {"policy": "AGE", "maxAge": max_age, "cleanupInterval": cleanup},
    "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release()},
    "modes": modes,
}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")

with tempfile.TemporaryDirectory() as tmp:
    plots = {m["fsync"]: os.path.join(tmp, m["fsync"] + ".dat") for m in modes}
    for m in modes:
        with open(plots[m["fsync"]], "w") as f:
            for r in m["samples"]:
                size = ((r["heap_bytes"] or 0) + (r["index_bytes"] or 0)) / 2**20
                f.write(f'{r["elapsed_min"]} {r["sent_per_s"] / 1000:.2f} {r["p99_ms"] or 0} '
                        f'{size:.1f} {(r["dead_tuples"] or 0) / 1000:.1f}\n')

    def panel(col, title):
        lines = ", ".join(f"'{path}' using 1:{col} with linespoints title 'fsync {mode}'"
                          for mode, path in plots.items())
        return f"set title '{title}'\nplot {lines}\n"

    script = ("set terminal pngcairo size 1200,800\n" if subprocess.run(
        ["gnuplot", "-e", "set terminal pngcairo"], capture_output=True).returncode == 0
              else "set terminal png size 1200,800\n")
    script += f"set output '{png}'\nset multiplot layout 2,2\nset xlabel 'minutes'\nset grid\n"
    script += "set yrange [0:*]\n"
    script += panel(2, "rows sent per second (thousands)")
    script += panel(3, "insert-to-sent p99 (ms, database clock)")
    script += panel(4, "outbox heap + indexes (MB)")
    script += panel(5, "dead tuples (thousands)")
    script += "unset multiplot\n"
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
