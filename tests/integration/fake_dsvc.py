"""A stand-in for seclaunch's data service, for the Python helper's stream
tests without `seclaunch run`: open_shard / release_shard over a
SOCK_SEQPACKET socket, each shard a memory file of known bytes. A shard
not staged is answered "not-ready" once and then staged (counted as a
decryption); with linger 0 a shard every holder released is dropped at
once, so coming back to it decrypts it again. Counts what was asked.

    svc = FakeService(dir, shard_sizes, linger0=True)
    env = svc.env(files)     # SECLAUNCH_DATA / SECLAUNCH_DATA_SOCKET
"""
import json
import os
import socket
import threading


def shard_bytes(i, size):
    return bytes((i * 31 + k) % 251 for k in range(size))


class FakeService:
    def __init__(self, d, shard_sizes, linger0=True, window=None):
        self.sizes = list(shard_sizes)
        self.offsets = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        self.linger0 = linger0
        self.window = window if window is not None else sum(self.sizes)
        self.path = os.path.join(d, "fake-data.sock")
        self.lock = threading.Lock()
        self.staged = {}  # shard -> [fd, refs]
        self.decrypted = [0] * len(self.sizes)
        self.opened = []  # (connection number, shard) for each open_shard answered ok
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(self.path)
        self.srv.listen(64)
        self.conns = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def plaintext(self):
        return b"".join(shard_bytes(i, n) for i, n in enumerate(self.sizes))

    def entry(self, files):
        return {"kind": "stream", "size": sum(self.sizes), "method": "stream",
                "files": files, "window": self.window,
                "shards": [{"index": i, "offset": self.offsets[i], "size": n}
                           for i, n in enumerate(self.sizes)]}

    def env(self, dataset_id, files):
        return {"SECLAUNCH_DATA": json.dumps({dataset_id: self.entry(files)}),
                "SECLAUNCH_DATA_SOCKET": self.path}

    def _accept(self):
        while True:
            c, _ = self.srv.accept()
            with self.lock:
                self.conns += 1
                n = self.conns
            threading.Thread(target=self._serve, args=(c, n), daemon=True).start()

    def _release(self, held, i):
        held[i] -= 1
        if held[i] == 0:
            del held[i]
        st = self.staged.get(i)
        if st is None:
            return
        st[1] -= 1
        if st[1] == 0 and self.linger0:
            os.close(st[0])
            del self.staged[i]

    def _serve(self, c, n):
        held = {}
        try:
            while True:
                msg = c.recv(65536)
                if not msg:
                    break
                req = json.loads(msg.decode())
                i = req.get("shard")
                with self.lock:
                    if req.get("op") == "open_shard":
                        st = self.staged.get(i)
                        if st is None:
                            fd = os.memfd_create("shard")
                            os.write(fd, shard_bytes(i, self.sizes[i]))
                            self.staged[i] = [fd, 0]
                            self.decrypted[i] += 1
                            c.send(json.dumps({"ok": False, "error": "not-ready",
                                               "retry_ms": 1}).encode())
                            continue
                        st[1] += 1
                        held[i] = held.get(i, 0) + 1
                        self.opened.append((n, i))
                        socket.send_fds(c, [json.dumps({"ok": True, "size": self.sizes[i]})
                                            .encode()], [st[0]])
                    elif req.get("op") == "release_shard":
                        if held.get(i):
                            self._release(held, i)
                        c.send(b'{"ok": true}')
                    else:
                        c.send(b'{"ok": false, "error": "bad-request"}')
        finally:
            with self.lock:
                for i in list(held):
                    while held.get(i):
                        self._release(held, i)
            c.close()
