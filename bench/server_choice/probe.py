#!/usr/bin/env python3
"""Behaviour probes of an HTTP server on loopback, for bench/server_choice.sh (issue 14).

  probe.py idle PORT N        open N keep-alive connections (one GET / each, then idle), then
                              time fresh requests while they stay open; report how many of the
                              N are still open after HOLD seconds
  probe.py slowloris PORT N   N connections that send a request's headers one byte per second;
                              meanwhile time fresh requests (do they get served?)
  probe.py chunked PORT CAP   a chunked POST of 2 x CAP bytes in 16 KiB chunks: the status, the
                              bytes sent before the answer came, and whether the server closed

Prints one JSON object. Every loop is bounded in count and time; only 127.0.0.1 is contacted.
"""
import json
import socket
import sys
import time

HOST = "127.0.0.1"


def fresh_request(port, timeout=5.0):
    """One GET / on a new connection: (seconds, status) or (None, error)."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection((HOST, port), timeout=timeout)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else None
        return time.monotonic() - t0, status
    except OSError as e:
        return None, str(e)


def fresh_series(port, count=20, timeout=5.0):
    times, failures = [], 0
    for _ in range(count):
        dt, status = fresh_request(port, timeout)
        if dt is None or status != 200:
            failures += 1
        else:
            times.append(dt * 1000)
    times.sort()
    return {
        "fresh_requests": count,
        "fresh_failed": failures,
        "fresh_p50_ms": round(times[len(times) // 2], 2) if times else None,
        "fresh_max_ms": round(times[-1], 2) if times else None,
    }


def idle(port, n, hold):
    conns, opened_failed = [], 0
    for _ in range(n):
        try:
            s = socket.create_connection((HOST, port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            conns.append(s)
        except OSError:
            opened_failed += 1
    answered = 0
    deadline = time.monotonic() + 20
    for s in conns:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if s.recv(4096).startswith(b"HTTP/1.1 200"):
                answered += 1
        except OSError:
            pass
    out = {"idle_connections": n, "open_failed": opened_failed, "first_request_answered": answered}
    out.update(fresh_series(port))
    time.sleep(hold)
    still_open = 0
    for s in conns:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                continue  # closed by the server
        except BlockingIOError:
            pass
        except OSError:
            continue
        still_open += 1
    out["still_open_after_s"] = hold
    out["still_open"] = still_open
    for s in conns:
        s.close()
    return out


def slowloris(port, n, seconds):
    head = b"POST /inbox/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: "
    conns = []
    for _ in range(n):
        try:
            s = socket.create_connection((HOST, port), timeout=5)
            s.sendall(head)
            conns.append(s)
        except OSError:
            pass
    t_end = time.monotonic() + seconds
    results = []
    closed_by_server = 0
    while time.monotonic() < t_end:
        for s in list(conns):
            try:
                s.sendall(b"a")
            except OSError:
                conns.remove(s)
                closed_by_server += 1
        results.append(fresh_series(port, count=3, timeout=3.0))
        time.sleep(1.0)
    ok = sum(r["fresh_requests"] - r["fresh_failed"] for r in results)
    total = sum(r["fresh_requests"] for r in results)
    worst = max((r["fresh_max_ms"] or 0) for r in results) if results else None
    for s in conns:
        s.close()
    return {
        "slow_connections": n,
        "seconds": seconds,
        "fresh_served": ok,
        "fresh_total": total,
        "fresh_worst_ms": worst,
        "slow_closed_by_server": closed_by_server,
    }


def chunked(port, cap):
    s = socket.create_connection((HOST, port), timeout=10)
    s.sendall(b"POST /inbox/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"a" * 16384
    sent, status, closed = 0, None, False
    s.setblocking(False)
    reply = b""
    t0 = time.monotonic()
    while sent < 2 * cap:
        try:
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sent += len(chunk)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            closed = True
            break
        try:
            reply += s.recv(4096)
            if reply:
                break
        except BlockingIOError:
            pass
    if not closed and not reply:
        try:
            s.sendall(b"0\r\n\r\n")
        except OSError:
            closed = True
    s.settimeout(10)
    try:
        while b"\r\n\r\n" not in reply:
            d = s.recv(4096)
            if not d:
                break
            reply += d
    except OSError:
        pass
    if reply.startswith(b"HTTP/"):
        status = int(reply.split(b" ")[1])
    body = reply.split(b"\r\n\r\n", 1)[1][:80].decode(errors="replace") if b"\r\n\r\n" in reply else ""
    return {"cap": cap, "status": status, "body_start": body, "bytes_sent_before_answer": sent,
            "send_failed": closed, "seconds": round(time.monotonic() - t0, 3)}


def main():
    what, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if what == "idle":
        out = idle(port, n, hold=float(sys.argv[4]) if len(sys.argv) > 4 else 15)
    elif what == "slowloris":
        out = slowloris(port, n, seconds=int(sys.argv[4]) if len(sys.argv) > 4 else 15)
    elif what == "chunked":
        out = chunked(port, n)
    else:
        raise SystemExit("unknown probe " + what)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
