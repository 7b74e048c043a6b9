#!/usr/bin/env python3
"""A loopback HTTP server for tests: serves the files of a directory, and a few failures.

  GET /PATH           the file DIR/PATH (200, application/json for .json), or 404
  GET /status/NNN     an empty answer with status NNN
  GET /hang           answers nothing for 60 s (for timeouts)
  GET /endless        200 with a body that never ends (for size limits)
  GET /trickle        200 with one byte a second, forever (for total timeouts)
  GET /record/NAME    writes the request's headers to DIR/NAME.headers, then 404

Prints `listening on http://127.0.0.1:PORT` once bound, then serves until killed.
"""
import argparse
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class Handler(BaseHTTPRequestHandler):
    root = "."

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        path = urlsplit(self.path).path
        if path.startswith("/status/"):
            self.send_response(int(path.split("/")[2]))
            self.send_header("content-length", "0")
            self.end_headers()
        elif path == "/hang":
            time.sleep(60)
        elif path == "/trickle":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass
        elif path.startswith("/record/"):
            name = os.path.basename(path)
            with open(os.path.join(self.root, name + ".headers"), "w") as f:
                f.write("".join("%s: %s\n" % (k.lower(), v) for k, v in self.headers.items()))
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
        elif path == "/endless":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b" " * 65536)
            except OSError:
                pass
        else:
            name = os.path.normpath(path.lstrip("/"))
            file = os.path.join(self.root, name)
            if name.startswith("..") or not os.path.isfile(file):
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            with open(file, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("content-type", "application/json" if file.endswith(".json") else "application/octet-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    Handler.root = options.dir
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    parent = os.getppid()

    def exit_with_parent():  # a test killed by a signal leaves no server behind
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
