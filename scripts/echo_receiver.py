#!/usr/bin/env python3
"""A loopback HTTP receiver for the webhook quick start: prints each POST it gets and answers 200.

Usage: python3 scripts/echo_receiver.py [port]   (default 18091, examples/webhook-quickstart.yml)
"""
import http.server
import sys


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        print(f"{self.command} {self.path} X-Topic: {self.headers.get('X-Topic')} "
              f"x-source: {self.headers.get('x-source')} {body.decode()}", flush=True)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


port = int(sys.argv[1]) if len(sys.argv) > 1 else 18091
http.server.HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
