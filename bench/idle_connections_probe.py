#!/usr/bin/env python3
"""Time one new request to a QueueBox data port while N idle connections are open.

Usage: python3 bench/idle_connections_probe.py <port> <n>   (against a running `queuebox run`)
Prints the request's time before and with the idle connections.
"""
import socket, sys, time, http.client, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
port, n = int(sys.argv[1]), int(sys.argv[2])
def timed_get():
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("GET", "/health/live"); r = c.getresponse(); r.read(); c.close()
    return time.monotonic() - t
print("baseline_s", round(timed_get(), 4))
idle = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port)); idle.append(s)
print("opened", len(idle))
print("with_idle_s", round(timed_get(), 3))
for s in idle: s.close()
