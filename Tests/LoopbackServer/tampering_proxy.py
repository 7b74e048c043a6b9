#!/usr/bin/env python3
"""A loopback proxy that changes manifest answers on their way, for tests of code signing.

Python 3 standard library only. Every GET is forwarded to --upstream with its headers; the body
of an answer to /manifest has each --replace PATTERN REPLACEMENT (a Python regular expression over
the bytes, every match) applied, and its content-length set again. Other answers pass unchanged.

Usage: tampering_proxy.py --upstream http://127.0.0.1:PORT [--replace PATTERN REPLACEMENT]...
"""

import argparse
import re
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "accept-encoding"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
        request = urllib.request.Request(self.server.upstream + self.path, headers=headers)
        try:
            answer = urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as error:
            answer = error
        body = answer.read()
        if self.path.split("?", 1)[0] == "/manifest":
            for pattern, replacement in self.server.replacements:
                body = pattern.sub(replacement, body)
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            if name.lower() not in HOP_BY_HOP and name.lower() not in ("server", "date"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--replace", nargs=2, action="append", default=[], metavar=("PATTERN", "REPLACEMENT"))
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.upstream = args.upstream.rstrip("/")
    server.replacements = [(re.compile(p.encode()), r.encode()) for p, r in args.replace]
    sys.stdout.write("listening on http://127.0.0.1:%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
