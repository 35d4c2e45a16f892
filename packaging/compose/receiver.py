#!/usr/bin/env python3
"""The compose quick start's HTTP destination: prints each POST it gets and answers 200.

Usage: python3 receiver.py [port]   (default 8081, every interface: the relay is another container)
"""
import http.server
import sys


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        print(f"{self.command} {self.path} X-Topic: {self.headers.get('X-Topic')} "
              f"X-Message-Id: {self.headers.get('X-Message-Id')} {body.decode()}", flush=True)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


port = int(sys.argv[1]) if len(sys.argv) > 1 else 8081
http.server.ThreadingHTTPServer(("0.0.0.0", port), Receiver).serve_forever()
