#!/usr/bin/env python3
"""Holds connections against seclaunchd, as a denial-of-service attempt would,
and reports what the server did meanwhile and after.

  kms_hold.py --port P --ca CA.pem --pid PID [--idle N] [--tls-idle N]
              [--slow N] [--hold S]

--tls-idle N: TLS handshake done, then silence; --slow N: TLS, then a request
header trickled one byte every 0.5 s (slowloris); --idle N: plain TCP
connections that never send a byte (opened last: past the connection limit
they wait in the kernel's backlog). After --hold seconds everything is
closed and GET /v1/health is timed on a fresh connection. Prints key=value
lines: cpu_hold_s (the server's utime+stime during the hold, from
/proc/PID/stat), hold_s, health_status, health_s, opened_*."""
import argparse
import os
import socket
import ssl
import threading
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3): utime and stime are fields 14, 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tls_connect(port, ctx, timeout):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def health(port, ctx):
    t0 = time.monotonic()
    try:
        s = tls_connect(port, ctx, 5)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    except (OSError, ValueError):
        status = 0
    return status, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--tls-idle", type=int, default=0)
    ap.add_argument("--slow", type=int, default=0)
    ap.add_argument("--hold", type=float, default=3.0)
    a = ap.parse_args()
    ctx = ssl.create_default_context(cafile=a.ca)
    held, slow = [], []
    opened = {"tls_idle": 0, "slow": 0, "idle": 0}
    for _ in range(a.tls_idle):
        try:
            held.append(tls_connect(a.port, ctx, 5))
            opened["tls_idle"] += 1
        except OSError:
            pass
    for _ in range(a.slow):
        try:
            s = tls_connect(a.port, ctx, 5)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(s)
            opened["slow"] += 1
        except OSError:
            pass
    for _ in range(a.idle):
        try:
            held.append(socket.create_connection(("127.0.0.1", a.port), timeout=5))
            opened["idle"] += 1
        except OSError:
            pass
    stop = threading.Event()

    def trickle():
        header = b"X-Slow: " + b"a" * 4000
        i = 0
        while not stop.wait(0.5):
            b = header[i % len(header):i % len(header) + 1]
            for s in slow:
                try:
                    s.send(b)
                except OSError:
                    pass
            i += 1

    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(0.3)  # let the handshakes' CPU settle out of the sample
    c0, t0 = cpu_seconds(a.pid), time.monotonic()
    time.sleep(a.hold)
    c1, t1 = cpu_seconds(a.pid), time.monotonic()
    stop.set()
    t.join()
    for s in held + slow:
        try:
            s.close()
        except OSError:
            pass
    status, took = health(a.port, ctx)
    for k, v in opened.items():
        print(f"opened_{k}={v}")
    print(f"hold_s={t1 - t0:.2f}")
    print(f"cpu_hold_s={c1 - c0:.2f}")
    print(f"health_status={status}")
    print(f"health_s={took:.3f}")


if __name__ == "__main__":
    main()
