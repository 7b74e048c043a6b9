#!/usr/bin/env python3
"""A loopback HTTP server for tests: serves the files of a directory, and a few failures.

  GET /PATH           the file DIR/PATH (200, application/json for .json), or 404
  GET /status/NNN     an empty answer with status NNN
  GET /hang           answers nothing for 60 s (for timeouts)
  GET /endless        200 with a body that never ends (for size limits)
  GET /trickle        200 with one byte a second, forever (for total timeouts)
  GET /record/NAME    writes the request's headers to DIR/NAME.headers, then 404
  GET /redirect?to=U  302 to U (relative or absolute); /loop redirects to itself
  GET /gzip-bomb      64 MiB of zeros, gzip-compressed to about 64 KiB (content-encoding gzip)
  GET /cut/WHERE      closes the connection early: after the status line (status), in the
                      middle of the headers (headers), or 10 of 1000 announced bytes in (body)
  GET /not-http       answers bytes that are not HTTP, then closes

Prints `listening on http://HOST:PORT` once bound (--host 127.0.0.1 by default, or ::1), then
serves until killed.
"""
import argparse
import gzip
import socket
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
        elif path == "/redirect":
            target = dict(p.split("=", 1) for p in urlsplit(self.path).query.split("&") if "=" in p).get("to", "/")
            self.send_response(302)
            self.send_header("location", target.replace("%3A", ":").replace("%2F", "/"))
            self.send_header("content-length", "0")
            self.end_headers()
        elif path == "/loop":
            self.send_response(302)
            self.send_header("location", "/loop")
            self.send_header("content-length", "0")
            self.end_headers()
        elif path == "/gzip-bomb":
            self.send_response(200)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("content-encoding", "gzip")
            body = gzip_bomb()
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path.startswith("/cut/"):
            self.close_connection = True
            raw = {
                "status": b"HTTP/1.1 200 OK\r\n",
                "headers": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-le",
                "body": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n0123456789",
            }.get(path[len("/cut/"):], b"")
            self.wfile.write(raw)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        elif path == "/not-http":
            self.close_connection = True
            self.wfile.write(b"SSH-2.0-OpenSSH_9.2\r\n\x00\xff\xfe garbage\r\n\r\n")
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
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


_gzip_bomb = []


def gzip_bomb():
    """Made on first use: compressing takes half a second every other test need not wait for."""
    if not _gzip_bomb:
        _gzip_bomb.append(gzip.compress(bytes(64 << 20), compresslevel=9))
    return _gzip_bomb[0]


class IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    Handler.root = options.dir
    server = (IPv6Server if ":" in options.host else ThreadingHTTPServer)((options.host, options.port), Handler)
    server.daemon_threads = True
    parent = os.getppid()

    def exit_with_parent():  # a test killed by a signal leaves no server behind
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    host = f"[{options.host}]" if ":" in options.host else options.host
    print(f"listening on http://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
