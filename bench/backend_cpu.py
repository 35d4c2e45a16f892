#!/usr/bin/env python3
"""backend_cpu.py: CPU seconds that PostgreSQL client backends spent, per group of databases,
while a given process runs (bench/claim_backlog_bench.sh uses it around the drain).

    backend_cpu.py PID PG_URL small=^db_small_ uniform=^db_uniform$ ...

Polls pg_stat_activity every 0.2 s for client backends of databases matching each group's
regular expression and reads utime + stime from /proc/<backend pid>/stat (the server runs on this
machine), keeping the last value seen per backend, until PID exits; prints one JSON object
{group: cpu seconds}. Backend CPU time does not count the time a backend waited for a core, so on
a shared, loaded machine it measures the statements' cost more steadily than wall time. The last
0.2 s of each backend before PID exits can be missed (the drain's backends live until it ends).
"""
import json
import os
import re
import subprocess
import sys
import time


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def main():
    pid, url = int(sys.argv[1]), sys.argv[2]
    groups = [arg.split("=", 1) for arg in sys.argv[3:]]
    seen = {}  # backend pid -> (database, ticks)
    while alive(pid):
        out = subprocess.run(
            ["psql", "-Atq", url, "-c",
             "SELECT pid, datname FROM pg_stat_activity WHERE backend_type = 'client backend'"
             " AND pid <> pg_backend_pid()"],
            capture_output=True, text=True).stdout
        for line in out.split("\n"):
            if "|" not in line:
                continue
            bpid, db = line.split("|", 1)
            try:
                with open(f"/proc/{bpid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                seen[int(bpid)] = (db, int(fields[11]) + int(fields[12]))
            except (OSError, IndexError, ValueError):
                pass
        time.sleep(0.2)
    tick = os.sysconf("SC_CLK_TCK")
    result = {}
    for name, pattern in groups:
        ticks = sum(t for db, t in seen.values() if re.search(pattern, db))
        result[name] = round(ticks / tick, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
