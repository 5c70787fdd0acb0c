#!/usr/bin/env bash
# The KMS client against misbehaving servers: wrong CA (nothing sent), a
# pinned key, a server that is down (retries, then exit 5), 5xx (retried)
# versus 4xx (not retried), garbage, a huge answer and a stall (clear error
# in bounded time). The misbehaving servers are a python3 TLS server started
# here as a child on loopback.
. "$(dirname "$0")/lib.sh"

cd "$T" || exit 1
start_swtpm tpm
start_kms "$T/kms" || exit 1
head -c 100000 /dev/urandom >plain
check "enroll" 0 "$SL" enroll --kms "$KMS_URL" --kms-ca "$KMS_CA" -q
# the first enrollment on a fresh TPM probes for an AK that is not there
# yet: the TSS library's own ERROR lines about it must not reach the user
assert "enroll: none of the TSS library's own log lines on stderr" bash -c "! grep -q 'esys' '$T/err'"
check "key create" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id k1
check "encrypt --kms" 0 "$SL" encrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" --key-id k1 \
	--admin-token-file "$KMS_TOKEN" --dataset-id ds plain -o a.sld

# --- TLS verification -----------------------------------------------------
# another service, started and stopped in a subshell, only for its CA
(start_kms "$T/other" && stop_kms)
check "a good decrypt first (the challenge counter moves)" 0 \
	"$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" a.sld -o first.bin
before=$(kms_metric 'seclaunchd_requests_total{route="challenge",code="2xx"}')
check_err "wrong CA: exit 5, TLS verification named" 5 "TLS verification failed.*nothing was sent" \
	"$SL" decrypt --kms "$KMS_URL" --kms-ca other/ca.pem a.sld -o dec.bin
assert "the counter counted the good one" test "$before" -ge 1
assert "wrong CA: the server saw no challenge (no evidence was made or sent)" \
	test "$(kms_metric 'seclaunchd_requests_total{route="challenge",code="2xx"}')" = "$before"
assert "wrong CA: no output" test ! -e dec.bin
assert "wrong CA: not retried" sh -c "! grep -q retrying '$T/err'"
pin="sha256//$(openssl x509 -in "$KMS_STATE/server.pem" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)"
check "pinned key that matches" 0 "$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" \
	--admin-token-file "$KMS_TOKEN" --id k2 --kms-pin "$pin"
check_err "pinned key that does not match: exit 5" 5 "TLS verification failed" \
	"$SL" key create --kms "$KMS_URL" --kms-ca "$KMS_CA" --admin-token-file "$KMS_TOKEN" --id k3 \
	--kms-pin "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
check_err "plain http is refused" 1 "must be an https:// URL" \
	"$SL" decrypt --kms "http://127.0.0.1:1" a.sld -o dec.bin

# --- server down ------------------------------------------------------------
down=$(free_port)
t0=$(date +%s%N)
check_err "server down: retries, then exit 5" 5 "unreachable \(Couldn't connect to server\)" \
	"$SL" decrypt --kms "https://127.0.0.1:$down" --kms-ca "$KMS_CA" a.sld -o dec.bin
t1=$(date +%s%N)
assert "server down: 3 retries with backoff were announced" test "$(grep -c 'retrying in' "$T/err")" -eq 3
assert "server down: gave up within 10 s" test $(((t1 - t0) / 1000000)) -lt 10000

# --- misbehaving servers ----------------------------------------------------
cat >bad_server.py <<'EOP'
import socket, ssl, sys, threading, time
mode, cert, key, portfile, hits = sys.argv[1:6]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(portfile + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(portfile + ".tmp", portfile)
n = 0
def answer(c):
    global n
    try:
        t = ctx.wrap_socket(c, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data:
            d = t.recv(4096)
            if not d:
                return
            data += d
        n += 1
        open(hits, "w").write(str(n))
        if mode == "stall":
            time.sleep(60)
            return
        if mode == "garbage":
            body = b"<html>not json</html>"
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif mode == "huge":
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n")
            chunk = b"{" * 65536
            for _ in range(128):
                t.sendall(chunk)
        elif mode in ("503", "500", "403"):
            body = b'{"type":"urn:x","title":"nope","status":%s,"detail":"test server says %s"}' % (mode.encode(), mode.encode())
            t.sendall(b"HTTP/1.1 " + mode.encode() + b" X\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        t.close()
    except Exception:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=answer, args=(c,), daemon=True).start()
EOP

# bad_server MODE: starts it, sets BAD_URL and BAD_HITS (a file counting requests)
bad_server() {
	rm -f "$T/port.$1" "$T/hits.$1"
	python3 bad_server.py "$1" "$KMS_STATE/server.pem" "$KMS_STATE/server.key" "$T/port.$1" "$T/hits.$1" &
	_PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/port.$1" ] && break; sleep 0.05; done
	BAD_URL="https://127.0.0.1:$(cat "$T/port.$1")"
	BAD_HITS=$T/hits.$1
}
hits() { cat "$BAD_HITS" 2>/dev/null || echo 0; }

bad_server garbage
check_err "garbage answer: exit 5 naming it" 5 "answer is not a JSON object" \
	"$SL" decrypt --kms "$BAD_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
bad_server huge
check_err "huge answer: capped, exit 5" 5 "larger than the 1048576-byte limit" \
	"$SL" decrypt --kms "$BAD_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
bad_server stall
t0=$(date +%s%N)
check_err "stalled server: timeout, exit 5" 5 "Timeout was reached" \
	env SECLAUNCH_KMS_TIMEOUT=2 "$SL" decrypt --kms "$BAD_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
t1=$(date +%s%N)
assert "stalled server: bounded time (< 8 s with a 2 s timeout)" test $(((t1 - t0) / 1000000)) -lt 8000
bad_server 503
check_err "503: retried, then exit 5 with the server's detail" 5 "HTTP 503.*test server says 503" \
	"$SL" decrypt --kms "$BAD_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
assert "503: 4 attempts" test "$(hits)" -eq 4
bad_server 403
check_err "403 to a challenge: not retried, exit 5" 5 "HTTP 403.*test server says 403" \
	"$SL" decrypt --kms "$BAD_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
assert "403: one attempt" test "$(hits)" -eq 1
assert "no plaintext from any failure" test ! -e dec.bin
check "the real server still decrypts" 0 "$SL" decrypt --kms "$KMS_URL" --kms-ca "$KMS_CA" a.sld -o dec.bin
assert "round trip" cmp -s plain dec.bin
finish
