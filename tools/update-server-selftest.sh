#!/usr/bin/env bash
# Checks tools/update-server.py from outside with curl: builds a server directory in a temp dir,
# starts the server on a free loopback port, runs every case, stops it. Exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
SERVER="$PWD/tools/update-server.py"

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

FAILED=0 PASSED=0
ok() { PASSED=$((PASSED + 1)); echo "ok   - $1"; }
bad() { FAILED=$((FAILED + 1)); echo "FAIL - $1${2:+: $2}"; }
# expect NAME ACTUAL WANTED
expect() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "got '$2', want '$3'"; fi; }

# -- the server directory --------------------------------------------------------------------------
DIR="$WORK/server"
mkdir -p "$DIR/assets" "$DIR/updates/1.0" "$DIR/updates/2.0"
b64key() { openssl dgst -sha256 -binary "$1" | basenc --base64url | tr -d '=\n'; }
put() { # put FILE CONTENT-TYPE -> prints the key
    local key; key=$(b64key "$1")
    cp "$1" "$DIR/assets/$key"; echo "$2" > "$DIR/assets/$key.type"; echo "$key"
}
printf '<!doctype html><title>one</title>' > "$WORK/index1.html"
printf '<!doctype html><title>two</title>' > "$WORK/index2.html"
printf 'console.log("bundle")\n' > "$WORK/bundle.js"
head -c 300000 /dev/urandom > "$WORK/big.png"
HTML1=$(put "$WORK/index1.html" text/html)
HTML2=$(put "$WORK/index2.html" text/html)
JS=$(put "$WORK/bundle.js" application/javascript)
PNG=$(put "$WORK/big.png" image/png)
PYKEY=$(python3 -c 'import base64,hashlib,sys; print(base64.urlsafe_b64encode(hashlib.sha256(open(sys.argv[1],"rb").read()).digest()).rstrip(b"=").decode())' "$WORK/index1.html")
expect "openssl|basenc and python agree on the base64url SHA-256 key" "$HTML1" "$PYKEY"

ID1=11111111-1111-4111-8111-111111111111
ID2=22222222-2222-4222-8222-222222222222
EMBEDDED=99999999-9999-4999-8999-999999999999
manifest() { # manifest ID CREATED HTML-KEY
    cat <<EOF
{"id": "$1", "createdAt": "$2", "runtimeVersion": "1.0",
 "launchAsset": {"hash": "$JS", "key": "bundle", "contentType": "application/javascript", "url": "/assets/$JS"},
 "assets": [{"hash": "$3", "key": "index", "contentType": "text/html", "fileExtension": ".html", "url": "/assets/$3"},
            {"hash": "$PNG", "key": "big", "contentType": "image/png", "fileExtension": ".png", "url": "/assets/$PNG"}],
 "metadata": {}, "extra": {"unknownField": [1, 2]}}
EOF
}
manifest "$ID1" 2026-01-01T00:00:00.000Z "$HTML1" > "$DIR/updates/1.0/$ID1.json"
manifest "$ID2" 2026-01-02T00:00:00.000Z "$HTML2" > "$DIR/updates/1.0/$ID2.json"
echo "$ID1" > "$DIR/updates/1.0/current"
# updates/2.0 exists but has no `current`.

# -- start (port 0) --------------------------------------------------------------------------------
start() { # start OUTVAR ARGS... ; sets $OUTVAR to the base URL
    local var=$1; shift
    local out="$WORK/out.$var" err="$WORK/err.$var"
    python3 "$SERVER" --dir "$DIR" --port 0 "$@" > "$out" 2> "$err" &
    PIDS+=($!)
    for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
    local line; line=$(head -n 1 "$out")
    if [[ "$line" =~ ^listening\ on\ http://127\.0\.0\.1:([0-9]+)$ ]] && [ "$(wc -l < "$out")" -eq 1 ]; then
        ok "port 0 prints exactly one line 'listening on http://127.0.0.1:PORT' ($var)"
    else
        bad "port 0 line ($var)" "stdout was '$(cat "$out")'"; exit 1
    fi
    printf -v "$var" 'http://127.0.0.1:%s' "${BASH_REMATCH[1]}"
}
start URL

H=(-H 'expo-protocol-version: 1' -H 'expo-platform: ios' -H 'expo-runtime-version: 1.0')
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
header() { # header NAME CURL-ARGS... -> the value of response header NAME
    local name=$1; shift
    curl -s -D - -o /dev/null "$@" | tr -d '\r' | awk -v n="$name" 'BEGIN{IGNORECASE=1} index(tolower($0), tolower(n) ": ")==1 {sub(/^[^:]*: /, ""); print; exit}'
}

# Parses a multipart/mixed manifest response with Python's email parser; prints one line a part:
# NAME<TAB>CONTENT-TYPE<TAB>DISPOSITION-TYPE<TAB>JSON-BODY(compact)
PARSE_MULTIPART='
import email.parser, email.policy, json, sys
ctype, body = sys.argv[1], open(sys.argv[2], "rb").read()
msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(b"content-type: " + ctype.encode() + b"\r\n\r\n" + body)
assert msg.is_multipart(), "not multipart"
assert not msg.defects, msg.defects
for part in msg.iter_parts():
    assert not part.defects, part.defects
    payload = part.get_payload(decode=True)
    print("%s\t%s\t%s\t%s" % (part.get_param("name", header="content-disposition"), part.get_content_type(),
          part.get_content_disposition(), json.dumps(json.loads(payload), separators=(",", ":"), sort_keys=True)))
'
fetch() { # fetch NAME CURL-ARGS... -> $WORK/NAME.body, $WORK/NAME.headers
    local name=$1; shift
    curl -s -D "$WORK/$name.headers" -o "$WORK/$name.body" "$@"
}
hval() { tr -d '\r' < "$WORK/$1.headers" | awk -v n="$2" 'index(tolower($0), tolower(n) ": ")==1 {sub(/^[^:]*: /, ""); print; exit}'; }
code() { tr -d '\r' < "$WORK/$1.headers" | head -n 1 | cut -d' ' -f2; }

# -- manifest as application/json -------------------------------------------------------------------
fetch json "${H[@]}" -H 'accept: application/json' "$URL/manifest"
expect "json: status" "$(code json)" 200
expect "json: content-type" "$(hval json content-type)" application/json
expect "json: expo-protocol-version" "$(hval json expo-protocol-version)" 1
expect "json: expo-sfv-version" "$(hval json expo-sfv-version)" 0
expect "json: cache-control" "$(hval json cache-control)" "private, max-age=0"
expect "json: content-length" "$(hval json content-length)" "$(wc -c < "$WORK/json.body" | tr -d ' ')"
expect "json: manifest id, launch asset URL made absolute from Host, unknown field kept" \
    "$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["id"], m["launchAsset"]["url"], m["assets"][0]["url"], m["extra"]["unknownField"])' "$WORK/json.body")" \
    "$ID1 $URL/assets/$JS $URL/assets/$HTML1 [1, 2]"
fetch expojson "${H[@]}" -H 'accept: application/expo+json' "$URL/manifest"
expect "accept application/expo+json -> that content-type" "$(hval expojson content-type)" application/expo+json

# -- manifest as multipart/mixed --------------------------------------------------------------------
fetch mp "${H[@]}" -H 'accept: multipart/mixed,application/expo+json,application/json' "$URL/manifest"
CT=$(hval mp content-type)
expect "multipart: status" "$(code mp)" 200
[[ "$CT" =~ ^multipart/mixed\;\ boundary=[A-Za-z0-9_-]+$ ]] && ok "multipart: content-type has a boundary ($CT)" || bad "multipart: content-type" "$CT"
expect "multipart: expo-protocol-version" "$(hval mp expo-protocol-version)" 1
expect "multipart: cache-control" "$(hval mp cache-control)" "private, max-age=0"
if PARTS=$(python3 -c "$PARSE_MULTIPART" "$CT" "$WORK/mp.body" 2>&1); then
    ok "multipart: Python's email parser reads the body without defects"
else
    bad "multipart: Python's email parser" "$PARTS"
fi
expect "multipart: parts are manifest then extensions, form-data, application/json" \
    "$(cut -f1-3 <<<"$PARTS" | tr '\t\n' ' |')" "manifest application/json form-data|extensions application/json form-data|"
expect "multipart: the manifest part equals the JSON response" "$(sed -n 1p <<<"$PARTS" | cut -f4)" \
    "$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])),separators=(",",":"),sort_keys=True))' "$WORK/json.body")"
expect "multipart: extensions part" "$(sed -n 2p <<<"$PARTS" | cut -f4)" '{"assetRequestHeaders":{}}'
expect "no accept header -> multipart (RFC 7231: anything acceptable)" \
    "$(header content-type "${H[@]}" "$URL/manifest" | cut -d';' -f1)" multipart/mixed
expect "accept 'application/expo+json;q=0.9, application/json;q=0.8, multipart/mixed' (the spec's example) -> multipart" \
    "$(header content-type "${H[@]}" -H 'accept: application/expo+json;q=0.9, application/json;q=0.8, multipart/mixed' "$URL/manifest" | cut -d';' -f1)" multipart/mixed
expect "accept 'multipart/mixed;q=0.1, application/json' -> json" \
    "$(header content-type "${H[@]}" -H 'accept: multipart/mixed;q=0.1, application/json' "$URL/manifest")" application/json
expect "accept text/html only -> 406" "$(status "${H[@]}" -H 'accept: text/html' "$URL/manifest")" 406
expect "accept 'multipart/mixed;q=0' -> 406" "$(status "${H[@]}" -H 'accept: multipart/mixed;q=0' "$URL/manifest")" 406

# -- noUpdateAvailable ------------------------------------------------------------------------------
fetch noup "${H[@]}" -H "expo-current-update-id: $ID1" -H 'accept: multipart/mixed,application/json' "$URL/manifest"
PARTS=$(python3 -c "$PARSE_MULTIPART" "$(hval noup content-type)" "$WORK/noup.body" 2>&1)
expect "current id = served id -> noUpdateAvailable directive" "$PARTS" "$(printf 'directive\tapplication/json\tform-data\t{"type":"noUpdateAvailable"}')"
expect "noUpdateAvailable: expo-protocol-version" "$(hval noup expo-protocol-version)" 1
expect "current id in upper case -> still noUpdateAvailable" \
    "$(curl -s "${H[@]}" -H "expo-current-update-id: ${ID1^^}" "$URL/manifest" | grep -c noUpdateAvailable)" 1
expect "current id = served id, JSON only -> the manifest (JSON cannot carry a directive)" \
    "$(curl -s "${H[@]}" -H "expo-current-update-id: $ID1" -H 'accept: application/json' "$URL/manifest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" "$ID1"
expect "current id = served id, protocol 0 -> the manifest" \
    "$(curl -s -H 'expo-protocol-version: 0' -H 'expo-platform: ios' -H 'expo-runtime-version: 1.0' -H "expo-current-update-id: $ID1" -H 'accept: application/json' "$URL/manifest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" "$ID1"
expect "current id = an older id -> the manifest" \
    "$(curl -s "${H[@]}" -H "expo-current-update-id: $ID2" -H 'accept: application/json' "$URL/manifest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" "$ID1"

# -- `current` is read per request ------------------------------------------------------------------
echo "$ID2" > "$DIR/updates/1.0/current"
expect "current switched to update 2 -> served without restart" \
    "$(curl -s "${H[@]}" -H 'accept: application/json' "$URL/manifest" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["id"], m["assets"][0]["hash"])')" "$ID2 $HTML2"

# -- rollBackToEmbedded -----------------------------------------------------------------------------
echo rollBackToEmbedded > "$DIR/updates/1.0/current"
fetch rb "${H[@]}" -H "expo-current-update-id: $ID2" -H "expo-embedded-update-id: $EMBEDDED" -H 'accept: multipart/mixed,application/json' "$URL/manifest"
PARTS=$(python3 -c "$PARSE_MULTIPART" "$(hval rb content-type)" "$WORK/rb.body" 2>&1)
expect "rollBackToEmbedded: one directive part" "$(cut -f1-3 <<<"$PARTS")" "$(printf 'directive\tapplication/json\tform-data')"
expect "rollBackToEmbedded: type and an ISO 8601 commitTime" \
    "$(cut -f4 <<<"$PARTS" | python3 -c 'import json,sys,re; d=json.load(sys.stdin); print(d["type"], bool(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", d["parameters"]["commitTime"])))')" \
    "rollBackToEmbedded True"
expect "rollBackToEmbedded while running the embedded update -> noUpdateAvailable" \
    "$(curl -s "${H[@]}" -H "expo-current-update-id: $EMBEDDED" -H "expo-embedded-update-id: $EMBEDDED" "$URL/manifest" | grep -o '"type": "[A-Za-z]*"')" '"type": "noUpdateAvailable"'
expect "rollBackToEmbedded, JSON only -> 406" "$(status "${H[@]}" -H 'accept: application/json' "$URL/manifest")" 406
expect "rollBackToEmbedded, protocol 0 -> 406" \
    "$(status -H 'expo-protocol-version: 0' -H 'expo-platform: ios' -H 'expo-runtime-version: 1.0' "$URL/manifest")" 406
echo "$ID1" > "$DIR/updates/1.0/current"

# -- 400 / 404 --------------------------------------------------------------------------------------
expect "no expo-platform -> 400" "$(status -H 'expo-protocol-version: 1' -H 'expo-runtime-version: 1.0' "$URL/manifest")" 400
expect "expo-platform: web -> 400" "$(status -H 'expo-protocol-version: 1' -H 'expo-platform: web' -H 'expo-runtime-version: 1.0' "$URL/manifest")" 400
expect "expo-platform: android -> 200" "$(status -H 'expo-protocol-version: 1' -H 'expo-platform: android' -H 'expo-runtime-version: 1.0' "$URL/manifest")" 200
expect "no expo-runtime-version -> 400" "$(status -H 'expo-protocol-version: 1' -H 'expo-platform: ios' "$URL/manifest")" 400
expect "expo-runtime-version: ../1.0 -> 400" "$(status -H 'expo-protocol-version: 1' -H 'expo-platform: ios' -H 'expo-runtime-version: ../1.0' "$URL/manifest")" 400
expect "expo-protocol-version: 2 -> 400" "$(status -H 'expo-protocol-version: 2' -H 'expo-platform: ios' -H 'expo-runtime-version: 1.0' "$URL/manifest")" 400
REASON=$(curl -s -H 'expo-protocol-version: 1' -H 'expo-runtime-version: 1.0' "$URL/manifest")
expect "400 body is one line of text" "$(wc -l <<<"$REASON" | tr -d ' ')" 1
echo "     (400 reason: $REASON)"
expect "unknown runtime 9.9 -> 404" "$(status -H 'expo-protocol-version: 1' -H 'expo-platform: ios' -H 'expo-runtime-version: 9.9' "$URL/manifest")" 404
expect "runtime 2.0 without current -> 404" "$(status -H 'expo-protocol-version: 1' -H 'expo-platform: ios' -H 'expo-runtime-version: 2.0' "$URL/manifest")" 404
expect "unknown path -> 404" "$(status "$URL/nothing")" 404
expect "POST /manifest -> 405" "$(status -X POST "${H[@]}" "$URL/manifest")" 405

# -- assets -----------------------------------------------------------------------------------------
fetch asset "$URL/assets/$HTML1"
expect "asset: status" "$(code asset)" 200
expect "asset: content-type from KEY.type" "$(hval asset content-type)" text/html
expect "asset: content-length" "$(hval asset content-length)" "$(wc -c < "$WORK/index1.html" | tr -d ' ')"
expect "asset: bytes hash to the key" "$(b64key "$WORK/asset.body")" "$HTML1"
curl -s -o "$WORK/png.body" "$URL/assets/$PNG"
expect "asset: 300 kB image hashes to its key" "$(b64key "$WORK/png.body")" "$PNG"
expect "asset: a 42-character key -> 400" "$(status "$URL/assets/${HTML1:0:42}")" 400
expect "asset: a key with '=' -> 400" "$(status "$URL/assets/${HTML1:0:42}=")" 400
expect "asset: KEY.type -> 400" "$(status "$URL/assets/$HTML1.type")" 400
# The publisher names an asset KEY.EXT when its type has an extension: the same bytes as two types.
cp "$WORK/index1.html" "$DIR/assets/$HTML1.txt"; echo text/plain > "$DIR/assets/$HTML1.txt.type"
fetch typed "$URL/assets/$HTML1.txt"
expect "asset: KEY.txt -> 200" "$(code typed)" 200
expect "asset: KEY.txt has its own content-type" "$(hval typed content-type)" text/plain
expect "asset: KEY.TXT -> 400" "$(status "$URL/assets/$HTML1.TXT")" 400
expect "asset: KEY.txt.type -> 400" "$(status "$URL/assets/$HTML1.txt.type")" 400
expect "asset: unknown well-formed key -> 404" "$(status "$URL/assets/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")" 404
expect "asset: /assets/..%2F..%2Fetc%2Fpasswd -> 400" "$(status "$URL/assets/..%2F..%2Fetc%2Fpasswd")" 400
expect "asset: /assets/../x (--path-as-is) -> 400" "$(status --path-as-is "$URL/assets/../x")" 400
expect "asset: /assets/../project-token (--path-as-is) -> 400" "$(status --path-as-is "$URL/assets/../project-token")" 400
expect "asset: /assets/%2e%2e/%2e%2e/etc/passwd -> 400" "$(status --path-as-is "$URL/assets/%2e%2e/%2e%2e/etc/passwd")" 400
expect "asset: /assets//etc/passwd -> 400" "$(status --path-as-is "$URL/assets//etc/passwd")" 400
expect "asset: /assets/ -> 400" "$(status "$URL/assets/")" 400
expect "asset: /assets/KEY/ -> 400" "$(status "$URL/assets/$HTML1/")" 400
expect "asset: /assets/KEY%00 -> 400" "$(status "$URL/assets/$HTML1%00")" 400
expect "asset: /assets/../updates/1.0/current curl-normalized to /updates/... -> 404" "$(status "$URL/assets/../updates/1.0/current")" 404
printf 'secret outside' > "$WORK/outside"
LINK=$(b64key "$WORK/outside")
ln -s "$WORK/outside" "$DIR/assets/$LINK"; echo text/plain > "$DIR/assets/$LINK.type"
expect "asset: a symlink out of assets/ is not followed -> 404" "$(status "$URL/assets/$LINK")" 404
expect "asset: a symlink out of assets/ leaks nothing" "$(curl -s "$URL/assets/$LINK" | grep -c secret)" 0
expect "asset: query string is ignored" "$(status "$URL/assets/$HTML1?x=1")" 200
cp "$WORK/index1.html" "$WORK/keep.html"
printf '<!doctype html><title>CORRUPT</title>' > "$DIR/assets/$HTML1"
curl -s -o "$WORK/corrupt.body" "$URL/assets/$HTML1"
[ "$(b64key "$WORK/corrupt.body")" != "$HTML1" ] && ok "asset: an overwritten (corrupted) asset is served as is, next request" || bad "asset: corrupted asset" "still the old bytes"
cp "$WORK/keep.html" "$DIR/assets/$HTML1"

# -- project-token ----------------------------------------------------------------------------------
printf '  s3cret-token \n' > "$DIR/project-token"
expect "token: manifest without Authorization -> 401" "$(status "${H[@]}" "$URL/manifest")" 401
expect "token: 401 has www-authenticate" "$(header www-authenticate "${H[@]}" "$URL/manifest")" 'Bearer realm="updates"'
expect "token: wrong token -> 401" "$(status "${H[@]}" -H 'Authorization: Bearer nope' "$URL/manifest")" 401
expect "token: Basic scheme -> 401" "$(status "${H[@]}" -H 'Authorization: Basic s3cret-token' "$URL/manifest")" 401
expect "token: right token -> 200 manifest" "$(status "${H[@]}" -H 'Authorization: Bearer s3cret-token' "$URL/manifest")" 200
expect "token: asset without Authorization -> 401" "$(status "$URL/assets/$HTML1")" 401
expect "token: asset with the token -> 200" "$(status -H 'Authorization: Bearer s3cret-token' "$URL/assets/$HTML1")" 200
rm "$DIR/project-token"
expect "token removed -> 200 without Authorization" "$(status "${H[@]}" "$URL/manifest")" 200

# -- code signing -----------------------------------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/sign.key" -out "$WORK/sign.pem" -subj /CN=selftest -days 2 2>/dev/null
openssl x509 -in "$WORK/sign.pem" -pubkey -noout > "$WORK/sign.pub"
printf '{"keyId": "2026", "privateKey": "%s"}' "$WORK/sign.key" > "$DIR/code-signing.json"
verifies() { # verifies EXPO-SIGNATURE BODY-FILE -> 0 when sig verifies over the file with the key
    python3 -c 'import base64,re,sys; sys.stdout.buffer.write(base64.b64decode(re.search(r"sig=\"([^\"]*)\"", sys.argv[1]).group(1)))' "$1" > "$WORK/sig.bin" \
        && openssl dgst -sha256 -verify "$WORK/sign.pub" -signature "$WORK/sig.bin" "$2" > /dev/null
}
expect "signing: no expo-expect-signature -> no expo-signature" "$(header expo-signature "${H[@]}" -H 'accept: application/json' "$URL/manifest")" ""
fetch signed "${H[@]}" -H 'accept: application/json' -H 'expo-expect-signature: sig, keyid="2026", alg="rsa-v1_5-sha256"' "$URL/manifest"
SIG=$(tr -d '\r' < "$WORK/signed.headers" | awk 'index(tolower($0), "expo-signature: ")==1 {sub(/^[^:]*: /, ""); print}')
[[ "$SIG" =~ ^sig=\"[A-Za-z0-9+/=]+\",\ keyid=\"2026\",\ alg=\"rsa-v1_5-sha256\"$ ]] && ok "signing: JSON answer carries expo-signature sig, keyid, alg" || bad "signing: header" "'$SIG'"
verifies "$SIG" "$WORK/signed.body" && ok "signing: the JSON answer's signature verifies over its body" || bad "signing: JSON signature does not verify"
fetch signedpart "${H[@]}" -H 'accept: multipart/mixed' -H 'expo-expect-signature: sig' "$URL/manifest"
python3 -c '
import email.parser, email.policy, sys
ctype = [l.split(":", 1)[1].strip() for l in open(sys.argv[1]).read().splitlines() if l.lower().startswith("content-type:")][0]
msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(b"content-type: " + ctype.encode() + b"\r\n\r\n" + open(sys.argv[2], "rb").read())
part = [p for p in msg.iter_parts() if p.get_param("name", header="content-disposition") == "manifest"][0]
open(sys.argv[3], "w").write(part["expo-signature"] or "")
open(sys.argv[4], "wb").write(part.get_payload(decode=True))
' "$WORK/signedpart.headers" "$WORK/signedpart.body" "$WORK/part.sig" "$WORK/part.body"
verifies "$(cat "$WORK/part.sig")" "$WORK/part.body" && ok "signing: the manifest part's signature verifies over the part's body" || bad "signing: part signature" "'$(cat "$WORK/part.sig")'"
start SIGNING --signing-key "$WORK/sign.key" --key-id override
expect "signing: --signing-key and --key-id override code-signing.json" \
    "$(header expo-signature "${H[@]}" -H 'accept: application/json' -H 'expo-expect-signature: sig' "$SIGNING/manifest" | grep -o 'keyid="[^"]*"')" 'keyid="override"'
rm "$DIR/code-signing.json"
expect "signing: no key configured -> no expo-signature even when expected" "$(header expo-signature "${H[@]}" -H 'accept: application/json' -H 'expo-expect-signature: sig' "$URL/manifest")" ""

# -- quiet logging ----------------------------------------------------------------------------------
expect "no per-request lines on stderr without --verbose" "$(wc -c < "$WORK/err.URL" | tr -d ' ')" 0

# -- --rate -----------------------------------------------------------------------------------------
start SLOW --rate 100000
T=$(curl -s -o "$WORK/slow.body" -w '%{time_total}' "$SLOW/assets/$PNG")
expect "--rate 100000: 300 kB image still hashes to its key" "$(b64key "$WORK/slow.body")" "$PNG"
# A floor only: 300 kB at 100 kB/s cannot take much under 3 s however fast the machine, while a
# loaded one may take any time longer (no ceiling is asserted).
python3 -c "import sys; sys.exit(0 if 2.5 <= float(sys.argv[1]) else 1)" "$T" \
    && ok "--rate 100000: 300 kB took ${T}s (3 s at the least)" || bad "--rate 100000: not throttled" "${T}s"
# Kill the slow server mid-download: the client must see a short body.
curl -s -o "$WORK/cut.body" "$SLOW/assets/$PNG" & CURL=$!
sleep 1
kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null
wait "$CURL"; RC=$?
GOT=$(wc -c < "$WORK/cut.body" | tr -d ' ')
[ "$RC" -ne 0 ] && [ "$GOT" -gt 0 ] && [ "$GOT" -lt 300000 ] \
    && ok "server killed mid-download: curl exit $RC after $GOT of 300000 bytes" \
    || bad "server killed mid-download" "curl exit $RC, $GOT bytes"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
