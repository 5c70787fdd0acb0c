#!/usr/bin/env python3
"""Keeps seclaunchd busy: THREADS clients each sending POST /v1/challenge
over keep-alive TLS connections until --seconds pass or the file named by
--stop-file exists. Prints ok=N bad=N errors=N (bad: an answer other than
200; errors: a connection that failed or closed under a request).

  kms_load.py --port P --ca CA.pem [--threads 4] [--seconds 5] [--stop-file F]
"""
import argparse
import os
import socket
import ssl
import threading
import time

REQ = (b"POST /v1/challenge HTTP/1.1\r\nHost: 127.0.0.1\r\n"
       b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")


def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("closed")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("closed")
        body += chunk
    return status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--stop-file")
    a = ap.parse_args()
    ctx = ssl.create_default_context(cafile=a.ca)
    end = time.monotonic() + a.seconds
    counts = {"ok": 0, "bad": 0, "errors": 0}
    mu = threading.Lock()

    def done():
        return time.monotonic() > end or (a.stop_file and os.path.exists(a.stop_file))

    def client():
        s = None
        while not done():
            try:
                if s is None:
                    raw = socket.create_connection(("127.0.0.1", a.port), timeout=10)
                    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                s.sendall(REQ)
                st = read_response(s)
                with mu:
                    counts["ok" if st == 200 else "bad"] += 1
            except (OSError, ValueError, IndexError):
                with mu:
                    counts["errors"] += 1
                if s is not None:
                    s.close()
                s = None
                time.sleep(0.05)
        if s is not None:
            s.close()

    ts = [threading.Thread(target=client) for _ in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(" ".join(f"{k}={v}" for k, v in counts.items()), flush=True)


if __name__ == "__main__":
    main()
