#!/usr/bin/env python3
"""Summarises a relay phase trace (QB_PHASE_TRACE, a binary built with bench/phase_trace.patch).

    python3 bench/phase_trace.py /tmp/t/on-nats-B.csv [more.csv ...]   # one JSON object per file

Events (name,start_ns,end_ns,n,thread): claim, write_outcomes, slice (a worker's PublishSlice),
publish_batch, js_build_pub / js_flush / js_ackwait (the JetStream publish of a slice: build and
queue the messages, the PING that writes them, the wait for the PubAcks), js_ack (one message,
queued -> its PubAck settled), worker_wait, poll_room.

Prints per phase the count and p50/p90/p99/mean in ms, and for the drain (first slice start to
last slice end): the time-weighted mean of messages in a publish, the share of the time with
none, and that idle time split by whether claimed rows were queued (a hand-off gap) or not (the
publishes waited for a claim).
"""
import json
import sys


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def summary(path):
    ev = []
    for line in open(path):
        name, s, e, n, th = line.strip().split(",")
        ev.append((name, int(s), int(e), int(n), th))
    by = {}
    for name, s, e, n, _ in ev:
        by.setdefault(name, []).append((s, e, n))
    out = {"file": path}
    for name in ("claim", "claim_sql", "marksent_sql", "write_outcomes", "slice", "publish_batch", "js_build_pub", "js_flush",
                 "js_ackwait", "js_ack", "worker_wait"):
        xs = [(e - s) / 1e6 for s, e, _ in by.get(name, [])]
        if xs:
            out[name] = {"count": len(xs), "p50_ms": round(pct(xs, 50), 3),
                         "p90_ms": round(pct(xs, 90), 3), "p99_ms": round(pct(xs, 99), 3),
                         "mean_ms": round(sum(xs) / len(xs), 3)}
    slices = sorted(by.get("slice", []))
    if not slices:
        return out
    t0, t1 = slices[0][0], max(e for _, e, _ in slices)
    wall = (t1 - t0) / 1e9
    msgs = sum(n for _, _, n in slices)
    out["drain"] = {"wall_s": round(wall, 3), "messages": msgs,
                    "msg_per_s": round(msgs / wall, 1),
                    "slice_size_mean": round(msgs / len(slices), 2)}
    # Messages in a publish over time, and rows claimed but not yet in a slice.
    points = []
    for s, e, n in slices:
        points.append((s, 0, n))
        points.append((e, 0, -n))
    queued_points = []
    for s, e, n in by.get("claim", []):
        if n > 0:
            queued_points.append((e, n))
    for s, e, n in slices:
        queued_points.append((s, -n))
    allp = sorted([(t, "f", d) for t, _, d in points] + [(t, "q", d) for t, d in queued_points])
    inflight = queued = 0
    last = t0
    weighted = idle = idle_starved = 0.0
    for t, kind, d in allp:
        if t > t1:
            break
        if t >= t0:
            dt = (t - last) / 1e9
            weighted += inflight * dt
            if inflight == 0:
                idle += dt
                if queued <= 0:
                    idle_starved += dt
            last = t
        if kind == "f":
            inflight += d
        else:
            queued += d
    out["drain"].update({
        "mean_in_flight": round(weighted / wall, 2),
        "share_with_none_in_flight": round(idle / wall, 3),
        "share_none_in_flight_and_none_queued": round(idle_starved / wall, 3),
        "slice_time_share": round(sum(e - s for s, e, _ in slices) / 1e9 / wall, 3),
    })
    # Gap between one slice's end and the next slice's start (one slice at a time at concurrency
    # 8 when each takes all 8 slots).
    gaps = [(slices[i + 1][0] - slices[i][1]) / 1e6 for i in range(len(slices) - 1)]
    gaps = [g for g in gaps if g >= 0]
    if gaps:
        out["gap_between_slices"] = {"count": len(gaps), "p50_ms": round(pct(gaps, 50), 3),
                                     "p90_ms": round(pct(gaps, 90), 3),
                                     "mean_ms": round(sum(gaps) / len(gaps), 3)}
    rooms = [n for _, _, n in by.get("poll_room", [])]
    if rooms:
        out["poll_cycles"] = len(rooms)
    return out


for p in sys.argv[1:]:
    print(json.dumps(summary(p), indent=1))
