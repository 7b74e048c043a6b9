#!/usr/bin/env python3
"""A small Expo Updates v1 protocol server over a directory that `eventlog deploy publish` writes.

Python 3 standard library only. For tests on loopback; not hardened for the open internet.

Layout of --dir (read again on every request):

    assets/<KEY>          asset bytes; KEY = base64url (no padding) SHA-256 of the bytes
    assets/<KEY>.type     one line: the asset's content type
    updates/<RUNTIME>/<UPDATE_ID>.json   a manifest; each asset "url" is a path "/assets/KEY"
    updates/<RUNTIME>/current            one line: UPDATE_ID, or the word rollBackToEmbedded
    updates/<RUNTIME>/rollout            optional; {"update": UPDATE_ID, "percent": 0 to 100}
    updates/<RUNTIME>/channels/<NAME>/current, .../rollout
                                         the same for channel NAME (a request's expo-channel-name);
                                         without the header, the two files above are the channel
    project-token         optional; if present, requests need "Authorization: Bearer <token>"
    server-defined-headers   optional; one line, sent as expo-server-defined-headers (an SFV dictionary)
    manifest-filters         optional; one line, sent as expo-manifest-filters (an SFV dictionary)
    code-signing.json        optional; {"keyId": ID, "privateKey": ABSOLUTE_PATH}, as `eventlog deploy
                             publish --sign-with KEY.pem [--key-id ID]` writes it: the key that signs

Rollouts: a request whose eas-client-id (the install's id) and the rollout's update id hash to a
bucket below the percent gets the rollout's update instead of current: the bucket is the first 8
bytes of SHA-256("INSTALL_ID:UPDATE_ID"), big-endian, modulo 100 (as the Swift `Rollout.bucket`).
A request without eas-client-id is never in a rollout.

Code signing (Expo's rsa-v1_5-sha256): when a manifest request carries expo-expect-signature and a
key is configured (--signing-key KEY.pem [--key-id ID] on the command line, which overrides
code-signing.json), the manifest part and any directive part (the manifest response itself, for a
JSON answer) get the header `expo-signature: sig="BASE64", keyid="ID", alg="rsa-v1_5-sha256"`, the
signature over the exact bytes of that body, made by `openssl dgst -sha256 -sign KEY` (key id
default "main"). A request without expo-expect-signature gets no signature; one with it, when no
key is configured, gets none either (the client then refuses the answer).

Usage: update-server.py --dir DIR [--host 127.0.0.1] [--port 0] [--rate BYTES_PER_SEC] [--request-log FILE] [--asset-log FILE]
                        [--signing-key KEY.pem] [--key-id ID] [--verbose]

See docs/expo-updates-v1-summary.md for the protocol and the choices made where it is silent.
"""

import argparse
import base64
import datetime
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# An asset's SHA-256 in base64url, then maybe its type's extension (never "type": KEY.type is
# the file that holds the asset's content type, not an asset).
ASSET_KEY = re.compile(r"[A-Za-z0-9_-]{43}(\.(?!type$)[a-z0-9]{1,8})?")
UPDATE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
CHANNEL = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
CONTENT_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=(\"[^\"\r\n]*\"|[A-Za-z0-9!#$&^_.+-]+))*")
HOST = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")
PLATFORMS = ("ios", "android")
ROLLBACK = "rollBackToEmbedded"
# The media types this server can produce for a manifest request, in its own order of preference
# (used to break ties between equal q values).
MULTIPART, EXPO_JSON, JSON = "multipart/mixed", "application/expo+json", "application/json"
OFFERED = (MULTIPART, EXPO_JSON, JSON)


class Reply(Exception):
    """A short non-2xx answer: a status and a one-line text reason."""

    def __init__(self, status, reason, headers=()):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, list(headers)


def read_line(path):
    """The first line of a small regular file (not followed if a symlink), stripped; None if absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:  # ELOOP: a symlink
        raise Reply(500, "cannot read %s: %s" % (os.path.basename(path), error.strerror))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise Reply(500, "%s is not a regular file" % os.path.basename(path))
        data = f.read(4097)
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0].strip() if text else ""


def read_rollout(path):
    """A channel's rollout file as (update id, percent), or None when there is none."""
    text = read_line(path)
    if not text:
        return None
    try:
        rollout = json.loads(text)
    except ValueError:
        raise Reply(500, "%s is not JSON" % os.path.basename(path))
    update, percent = (rollout.get("update"), rollout.get("percent")) if isinstance(rollout, dict) else (None, None)
    if not isinstance(update, str) or not UPDATE_ID.fullmatch(update) or type(percent) is not int or not 0 <= percent <= 100:
        raise Reply(500, 'the rollout file is not {"update": ID, "percent": 0 to 100}')
    return update, percent


def in_rollout(install_id, update, percent):
    """Whether the install is offered the rollout's update: never without an id."""
    if not install_id:
        return False
    digest = hashlib.sha256(("%s:%s" % (install_id, update)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % 100 < percent


def parse_accept(value):
    """{media range: q} from an Accept header value (RFC 7231 5.3.2); q defaults to 1."""
    ranges = {}
    for item in value.split(","):
        parts = [p.strip() for p in item.split(";")]
        media = parts[0].lower()
        if not media:
            continue
        q = 1.0
        for param in parts[1:]:
            name, _, val = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(val.strip())
                except ValueError:
                    q = 0.0
        ranges[media] = max(q, ranges.get(media, 0.0)) if media in ranges else q
    return ranges


def quality(ranges, media):
    """The q the client gave `media`: the most specific matching range wins."""
    kind = media.split("/")[0] + "/*"
    for candidate in (media, kind, "*/*"):
        if candidate in ranges:
            return ranges[candidate]
    return 0.0


def negotiate(accept_header, allowed):
    """The media type in `allowed` the client prefers (ties: this server's order), or None."""
    if accept_header is None or not accept_header.strip():
        return allowed[0]  # RFC 7231 5.3.2: no Accept means any media type is acceptable
    ranges = parse_accept(accept_header)
    best, best_q = None, 0.0
    for media in allowed:
        q = quality(ranges, media)
        if q > best_q:
            best, best_q = media, q
    return best


def iso8601(timestamp):
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000)


def multipart(parts, sign=lambda body: None):
    """(content-type value, body bytes) of a multipart/mixed body with (name, content-type, bytes) parts;
    `sign(body)` gives the expo-signature of a manifest or directive part, or None."""
    while True:
        boundary = "expo-updates-" + secrets.token_hex(16)
        marker = b"--" + boundary.encode()
        if not any(marker in body for _, _, body in parts):
            break
    chunks = []
    for name, content_type, body in parts:
        chunks.append(marker + b"\r\n")
        chunks.append(('content-disposition: form-data; name="%s"\r\n' % name).encode())
        signature = sign(body) if name in ("manifest", "directive") else None
        if signature is not None:
            chunks.append(("expo-signature: %s\r\n" % signature).encode())
        chunks.append(("content-type: %s\r\n\r\n" % content_type).encode())
        chunks.append(body + b"\r\n")
    chunks.append(marker + b"--\r\n")
    return "multipart/mixed; boundary=%s" % boundary, b"".join(chunks)


KEY_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def signing_key(root, override):
    """(key path, key id) the server signs with: `override` (from the command line), else
    code-signing.json in `root`, else None."""
    if override:
        return override
    path = os.path.join(root, "code-signing.json")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise Reply(500, "cannot read code-signing.json: %s" % error.strerror)
    with os.fdopen(fd, "rb") as f:
        try:
            config = json.loads(f.read(65536).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise Reply(500, "code-signing.json is not JSON: %s" % error)
    key, key_id = (config.get("privateKey"), config.get("keyId", "main")) if isinstance(config, dict) else (None, None)
    if not isinstance(key, str) or not os.path.isabs(key) or not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
        raise Reply(500, "code-signing.json needs an absolute privateKey path and a keyId of letters, digits, '.', '_' or '-'")
    return key, key_id


def signature(body, key, key_id):
    """The expo-signature header value for `body`: RSA PKCS #1 v1.5 over its SHA-256, by `openssl dgst`."""
    try:
        done = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=body, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Reply(500, "cannot run openssl to sign: %s" % error)
    if done.returncode != 0 or not done.stdout:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[0]
        raise Reply(500, "openssl cannot sign with %s: %s" % (key, first))
    return 'sig="%s", keyid="%s", alg="rsa-v1_5-sha256"' % (base64.b64encode(done.stdout).decode(), key_id)


class Handler(BaseHTTPRequestHandler):
    server_version = "eventlog-update-server/1"
    protocol_version = "HTTP/1.1"

    # -- plumbing ---------------------------------------------------------------------------------

    def log_message(self, format, *args):
        if self.server.verbose:
            sys.stderr.write("%s - %s\n" % (self.address_string(), format % args))

    def send_text(self, status, reason, headers=()):
        body = (reason + "\n").encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        try:
            self.check_token()
            path = self.path.split("?", 1)[0]
            if path == "/manifest":
                self.manifest()
            elif path.startswith("/assets/"):
                self.asset(path[len("/assets/"):])
            else:
                raise Reply(404, "not found")
        except Reply as reply:
            self.send_text(reply.status, reply.reason, reply.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def refuse_method(self):
        self.close_connection = True  # any request body is left unread
        self.send_text(405, "only GET is served", [("allow", "GET")])

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = refuse_method

    def check_token(self):
        expected = read_line(os.path.join(self.server.root, "project-token"))
        if expected is None:
            return
        if not expected:
            raise Reply(500, "project-token is empty")
        given = self.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected.encode()):
            raise Reply(401, "missing or wrong bearer token", [("www-authenticate", 'Bearer realm="updates"')])

    # -- GET /manifest ----------------------------------------------------------------------------

    def manifest(self):
        h = self.headers
        if self.server.request_log:
            with self.server.log_lock, open(self.server.request_log, "a", encoding="utf-8") as log:
                log.write(json.dumps({name.lower(): value for name, value in h.items()}, sort_keys=True) + "\n")
        if len(h.get_all("expo-protocol-version") or []) > 1:
            raise Reply(400, "more than one expo-protocol-version header")
        protocol = (h.get("expo-protocol-version") or "0").strip()
        if protocol not in ("0", "1"):
            raise Reply(400, "unsupported expo-protocol-version %r; expected 0 or 1" % protocol)
        protocol = int(protocol)
        platform = (h.get("expo-platform") or "").strip()
        if platform not in PLATFORMS:
            raise Reply(400, "missing or unsupported expo-platform; expected ios or android")
        runtime = (h.get("expo-runtime-version") or "").strip()
        if not runtime:
            raise Reply(400, "missing expo-runtime-version")
        if runtime in (".", "..") or any(c in runtime for c in "/\\\0") or any(ord(c) < 32 for c in runtime):
            raise Reply(400, "invalid expo-runtime-version")

        updates = os.path.join(self.server.root, "updates")
        folder = os.path.join(updates, runtime)
        if not os.path.isdir(folder) or os.path.islink(folder):
            raise Reply(404, "no updates for runtime version %s" % runtime)
        channel = (h.get("expo-channel-name") or "").strip()
        if channel and not CHANNEL.fullmatch(channel):
            raise Reply(400, "invalid expo-channel-name")
        channel_folder = os.path.join(folder, "channels", channel) if channel else folder
        if channel and (not os.path.isdir(channel_folder) or os.path.islink(channel_folder)):
            raise Reply(404, "no channel %s for runtime version %s" % (channel, runtime))
        current_path = os.path.join(channel_folder, "current")
        current = read_line(current_path)
        if not current:
            raise Reply(404, "no current update for runtime version %s%s" % (runtime, " on channel " + channel if channel else ""))
        rollout = read_rollout(os.path.join(channel_folder, "rollout"))
        if rollout and in_rollout((h.get("eas-client-id") or "").strip(), *rollout):
            current = rollout[0]
        current_update_id = (h.get("expo-current-update-id") or "").strip().lower()
        embedded_update_id = (h.get("expo-embedded-update-id") or "").strip().lower()

        if current == ROLLBACK:
            if protocol == 0:
                raise Reply(406, "a rollBackToEmbedded directive needs expo-protocol-version 1")
            if current_update_id and current_update_id == embedded_update_id:
                self.directive({"type": "noUpdateAvailable"})  # already running the embedded update
            else:
                commit_time = iso8601(os.lstat(current_path).st_mtime)
                self.directive({"type": ROLLBACK, "parameters": {"commitTime": commit_time}})
            return

        if not UPDATE_ID.fullmatch(current):
            raise Reply(500, "updates/%s/current names no valid update id" % runtime)
        manifest_path = os.path.join(folder, current + ".json")
        try:
            fd = os.open(manifest_path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise Reply(500, "updates/%s/current names %s, which has no manifest" % (runtime, current))
        except OSError as error:
            raise Reply(500, "cannot read the manifest of %s: %s" % (current, error.strerror))
        with os.fdopen(fd, "rb") as f:
            try:
                manifest = json.loads(f.read().decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                raise Reply(500, "the manifest of %s is not JSON: %s" % (current, error))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("id"), str):
            raise Reply(500, "the manifest of %s is not an object with a string id" % current)

        if protocol == 1 and current_update_id and current_update_id in (manifest["id"].lower(), current.lower()):
            media = negotiate(h.get("accept"), (MULTIPART,))
            if media == MULTIPART:
                self.directive({"type": "noUpdateAvailable"})
                return
            # JSON cannot carry a directive; the current update itself is a correct answer.

        host = self.host()
        for asset in [manifest.get("launchAsset")] + list(manifest.get("assets") or []):
            if isinstance(asset, dict) and isinstance(asset.get("url"), str) and asset["url"].startswith("/"):
                asset["url"] = "http://" + host + asset["url"]
        body = json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

        media = negotiate(h.get("accept"), OFFERED)
        if media is None:
            raise Reply(406, "accept allows none of multipart/mixed, application/expo+json, application/json")
        if media == MULTIPART:
            extensions = json.dumps({"assetRequestHeaders": {}}).encode()
            content_type, body = multipart([("manifest", JSON, body), ("extensions", JSON, extensions)], self.sign)
            self.send_manifest_response(content_type, body)
        else:
            self.send_manifest_response(media, body, self.sign(body))

    def directive(self, directive):
        if negotiate(self.headers.get("accept"), (MULTIPART,)) != MULTIPART:
            raise Reply(406, "a %s directive can only be sent as multipart/mixed" % directive["type"])
        content_type, body = multipart([("directive", JSON, json.dumps(directive).encode())], self.sign)
        self.send_manifest_response(content_type, body)

    def sign(self, body):
        """The expo-signature of `body` when the request expects one and a key is configured, else None."""
        if self.headers.get("expo-expect-signature") is None:
            return None
        key = signing_key(self.server.root, self.server.signing_override)
        return signature(body, *key) if key else None

    def send_manifest_response(self, content_type, body, signature=None):
        self.send_response(200)
        self.send_header("expo-protocol-version", "1")
        self.send_header("expo-sfv-version", "0")
        if signature is not None:
            self.send_header("expo-signature", signature)
        for name in ("server-defined-headers", "manifest-filters"):
            value = read_line(os.path.join(self.server.root, name))
            if value is not None:
                self.send_header("expo-" + name, value)
        self.send_header("cache-control", "private, max-age=0")
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def host(self):
        given = (self.headers.get("host") or "").strip()
        if HOST.fullmatch(given):
            return given
        address, port = self.server.server_address[:2]
        return ("[%s]:%d" if ":" in address else "%s:%d") % (address, port)

    # -- GET /assets/KEY --------------------------------------------------------------------------

    def asset(self, key):
        if self.server.asset_log:
            with self.server.log_lock, open(self.server.asset_log, "a", encoding="utf-8") as log:
                log.write(json.dumps(key) + "\n")
        # `key` is the raw request path after /assets/, not percent-decoded: anything but the 43
        # base64url characters of a SHA-256, then maybe "." and a short lowercase extension
        # (a "/", "..", "%2F", a NUL) is refused here.
        if not ASSET_KEY.fullmatch(key):
            raise Reply(400, "an asset key is 43 characters of A-Z a-z 0-9 _ -, then maybe . and an extension of a-z 0-9")
        assets = os.path.join(self.server.root, "assets")
        if os.path.islink(assets) or not os.path.isdir(assets):
            raise Reply(404, "no such asset")
        content_type = read_line(os.path.join(assets, key + ".type")) or "application/octet-stream"
        if not CONTENT_TYPE.fullmatch(content_type):
            raise Reply(500, "assets/%s.type holds no valid content type" % key)
        try:
            fd = os.open(os.path.join(assets, key), os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            raise Reply(404, "no such asset")
        except OSError as error:  # ELOOP: a symlink is never followed
            raise Reply(404 if error.errno == errno.ELOOP else 500, "no such asset")
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise Reply(404, "no such asset")
            size = info.st_size
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(size))
            self.send_header("cache-control", "public, max-age=31536000, immutable")
            self.end_headers()
            self.send_body(f, size)

    def send_body(self, f, size):
        rate = self.server.rate
        chunk = 65536 if not rate else max(1, min(65536, rate // 20))
        start, sent = time.monotonic(), 0
        while sent < size:
            data = f.read(min(chunk, size - sent))
            if not data:  # the file shrank under us: the content-length cannot be kept
                self.close_connection = True
                return
            self.wfile.write(data)
            self.wfile.flush()
            sent += len(data)
            if rate:
                delay = start + sent / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser(description="Expo Updates v1 server over an `eventlog deploy publish` directory.")
    parser.add_argument("--dir", required=True, help="the server directory (assets/, updates/, project-token)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 binds a free port")
    parser.add_argument("--rate", type=int, default=0, help="throttle asset bodies to this many bytes a second")
    parser.add_argument("--request-log", help="append each manifest request's headers to this file, one JSON object a line")
    parser.add_argument("--asset-log", help="append the key of each asset request to this file, one JSON string a line")
    parser.add_argument("--signing-key", help="sign manifests and directives with this PEM RSA private key (overrides code-signing.json)")
    parser.add_argument("--key-id", default="main", help="the key id of --signing-key's signatures (default main)")
    parser.add_argument("--verbose", action="store_true", help="log each request on stderr")
    parser.add_argument("--exit-with-parent", action="store_true", help="stop when the process that started it ends (for tests)")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        parser.error("--dir %s is not a directory" % args.dir)
    if args.rate < 0:
        parser.error("--rate must be positive")
    if not KEY_ID.fullmatch(args.key_id):
        parser.error("--key-id must be 1 to 64 letters, digits, '.', '_' or '-', not '.' first")
    if args.signing_key and not os.path.isfile(args.signing_key):
        parser.error("--signing-key %s is not a file" % args.signing_key)

    if ":" in args.host:
        Server.address_family = socket.AF_INET6
    server = Server((args.host, args.port), Handler)
    server.root = os.path.realpath(args.dir)
    server.rate = args.rate
    server.verbose = args.verbose
    server.request_log = args.request_log
    server.asset_log = args.asset_log
    server.signing_override = (os.path.abspath(args.signing_key), args.key_id) if args.signing_key else None
    server.log_lock = threading.Lock()
    host, port = server.server_address[:2]
    shown = "[%s]" % host if ":" in host else host
    if args.exit_with_parent:
        parent = os.getppid()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)

        threading.Thread(target=watch_parent, daemon=True).start()
    sys.stdout.write("listening on http://%s:%d\n" % (shown, port))
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
