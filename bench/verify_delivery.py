#!/usr/bin/env python3
"""Checks an HTTP sink's arrival log against the outbox rows it should have received.

    verify_delivery.py ROWS_TSV ACCESS_LOG     # prints a JSON verdict; exit 0 pass, 1 fail
    verify_delivery.py --self-test             # proves the checks can fail; exit 0 when they do

ROWS_TSV: one row per line, `id<TAB>key<TAB>sequence` (psql `\\copy ... TO`), the rows of the
outbox before the drain. An empty key (or `\\N`) means no key: no order is checked for it.
ACCESS_LOG: one request per line in arrival order, whitespace-separated fields
`msec message_id message_key attempt status` (the nginx log_format in bench/scaleout_bench.sh:
$msec $http_x_message_id $http_x_message_key $http_x_attempt $status). The relay sends the row's
id as X-Message-Id and its key as X-Message-Key (src/destinations/http/http_destination.cc).

Checks (any failure makes the verdict "fail"):
- zero loss: every row id was received at least once;
- no stranger: every received id is a row of the outbox, with the row's key;
- per-key order: for each key, the rows' FIRST receipts come in strictly increasing sequence;
- every request was answered 2xx (a non-2xx answer means the sink did not take it).
Duplicates (an id received more than once) are allowed by at-least-once delivery: counted, not a
failure. A later repeat of an earlier row does not count as an order violation either.
"""
import json
import sys

MAX_EXAMPLES = 5


def read_rows(lines):
    """id -> (key or None, sequence)."""
    rows = {}
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise ValueError(f"rows line {n}: expected id<TAB>key<TAB>sequence, got {line!r}")
        rid, key, seq = parts
        rows[rid] = (None if key in ("", "\\N") else key, int(seq))
    return rows


def verify(rows, log_lines):
    """Returns the verdict as a dict; verdict["verdict"] is "pass" or "fail"."""
    received = {}  # id -> receipts
    last_seq = {}  # key -> sequence of the last row first-received for that key
    unknown, wrong_key, not_2xx, order, malformed = [], [], [], [], []
    receipts = 0
    for n, line in enumerate(log_lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 5:
            malformed.append(n)
            continue
        _, rid, key, _, status = fields
        receipts += 1
        if not status.startswith("2"):
            not_2xx.append({"line": n, "id": rid, "status": status})
            continue
        row = rows.get(rid)
        if row is None:
            unknown.append({"line": n, "id": rid})
            continue
        row_key, seq = row
        if (row_key or "-") != key:
            wrong_key.append({"line": n, "id": rid, "sent_key": key, "row_key": row_key})
        count = received.get(rid, 0)
        received[rid] = count + 1
        if count > 0 or row_key is None:
            continue
        prev = last_seq.get(row_key)
        if prev is not None and seq <= prev:
            order.append({"line": n, "key": row_key, "sequence": seq, "after_sequence": prev})
        else:
            last_seq[row_key] = seq
    missing = [rid for rid in rows if rid not in received]
    duplicates = sum(c - 1 for c in received.values())
    failures = {
        "missing": len(missing),
        "unknown_ids": len(unknown),
        "wrong_key": len(wrong_key),
        "not_2xx": len(not_2xx),
        "order_violations": len(order),
        "malformed_lines": len(malformed),
    }
    return {
        "verdict": "pass" if not any(failures.values()) else "fail",
        "rows": len(rows),
        "receipts": receipts,
        "delivered_distinct": len(received),
        "duplicates": duplicates,
        "keys_checked": len(last_seq),
        **failures,
        "examples": {
            "missing": missing[:MAX_EXAMPLES],
            "unknown_ids": unknown[:MAX_EXAMPLES],
            "wrong_key": wrong_key[:MAX_EXAMPLES],
            "not_2xx": not_2xx[:MAX_EXAMPLES],
            "order_violations": order[:MAX_EXAMPLES],
            "malformed_lines": malformed[:MAX_EXAMPLES],
        },
    }


def self_test():
    """A clean log passes; a dropped line, two swapped lines of one key, a stranger id and a
    500 answer each fail; a repeated line passes with one duplicate."""
    rows_lines = [f"id-{k}-{s}\tkey-{k}\t{s * 10 + k}\n" for s in range(3) for k in range(4)]
    rows_lines.append("id-nokey\t\\N\t99\n")
    rows = read_rows(rows_lines)
    # Arrival order: round-robin over the keys, each key in sequence order.
    good = [f"1.0 id-{k}-{s} key-{k} 1 204" for s in range(3) for k in range(4)]
    good.append("1.0 id-nokey - 1 204")
    swapped = list(good)
    i, j = good.index("1.0 id-2-0 key-2 1 204"), good.index("1.0 id-2-1 key-2 1 204")
    swapped[i], swapped[j] = swapped[j], swapped[i]
    cases = [
        ("clean", good, "pass", None),
        ("one line dropped", good[:5] + good[6:], "fail", "missing"),
        ("two lines of key-2 swapped", swapped, "fail", "order_violations"),
        ("an id not in the outbox", good + ["1.0 id-x key-0 1 204"], "fail", "unknown_ids"),
        ("a 500 answer", good + ["1.0 id-0-0 key-0 2 500"], "fail", "not_2xx"),
        ("a line repeated later", good + [good[0]], "pass", None),
    ]
    ok = True
    for name, log, want, reason in cases:
        got = verify(rows, log)
        fine = got["verdict"] == want and (reason is None or got[reason] > 0)
        ok &= fine
        print(f"{'ok  ' if fine else 'FAIL'} {name}: {got['verdict']} (missing {got['missing']}, "
              f"order {got['order_violations']}, unknown {got['unknown_ids']}, "
              f"duplicates {got['duplicates']})")
    dup = verify(rows, good + [good[0]])["duplicates"]
    if dup != 1:
        print(f"FAIL the repeated line counts {dup} duplicates, expected 1")
        ok = False
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        rows = read_rows(f)
    with open(argv[2], encoding="utf-8") as f:
        result = verify(rows, f)
    print(json.dumps(result))
    return 0 if result["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
