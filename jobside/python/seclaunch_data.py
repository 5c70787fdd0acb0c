"""Access to the datasets `seclaunch run` staged for this job.

seclaunch hands the job one environment variable, SECLAUNCH_DATA: a JSON
object mapping each dataset id to where its plaintext is:

    host: {"kind": "host", "size": N, "fd": FD, "path": "/proc/self/fd/FD",
           "method": "memfd_secret" | "memfd+mlock" | "memfd"}
          with "gpu": {"device": D, "library": PATH} under --stage gpu: the
          job uploads it in its own CUDA context (to_device, torch, cupy)
    sld:  --gpu-decrypt: the same memory file holding the file key and the
          SLD ciphertext, with "header_len", "chunk_size", "chunk_count",
          "header_sha256" and "gpu"; decrypted on the GPU by to_device/torch/cupy
    gpu:  {"kind": "gpu", "size": N, "device": D, "ipc_handle": "<128 hex>",
           "method": "gpu-ipc"}  (--stage gpu-ipc)

Host data is mapped read-only from the inherited descriptor (never a file on
disk), or, in a process that did not inherit it (subprocess with close_fds,
multiprocessing spawn, DataLoader workers, torchrun ranks), from a descriptor
the data service hands over (SECLAUNCH_DATA_SOCKET). Map the descriptor, not
the path: a memfd_secret file cannot be reopened through /proc/self/fd.
A sharded dataset's files: files(), open() (a zero-copy file object),
load_npy(), TorchFiles / TorchIterableFiles for torch.utils.data. A dataset
of many files has no file list in SECLAUNCH_DATA ("files_from": "service"):
the list is paged from the data service once per process. Standard
library only; numpy, cupy and torch are used when installed. See
docs/job-interface.md.

    import seclaunch_data as sd
    for name, ds in sd.datasets().items():
        view = ds.memoryview()          # zero-copy, read-only
        rows = ds.text().splitlines()   # convenience for small text data
"""

import ast
import bisect
import ctypes
import io
import json
import mmap
import os
import socket
import struct
import threading
import time

__all__ = ["Dataset", "DeviceBuffer", "datasets", "get", "files", "open", "load_npy",
           "MemFile", "SeclaunchDataError", "SeclaunchDataIntegrityError", "TorchFiles",
           "TorchIterableFiles", "TorchShuffledFiles", "shuffle_plan", "output_dir", "create",
           "OutputFile", "save", "load", "checkpoint"]

ENV = "SECLAUNCH_DATA"
SOCKET_ENV = "SECLAUNCH_DATA_SOCKET"
TOKEN_ENV = "SECLAUNCH_DATA_TOKEN"
_builtin_open = open
# read() of a streamed file keeps its shard held this long after the last
# read (one shard per dataset and process), so reading file by file costs a
# look-up, not a round trip to the data service; then it is given back
_SOFT_HOLD_S = 0.25


class SeclaunchDataError(RuntimeError):
    """SECLAUNCH_DATA is missing or malformed, or a dataset cannot be opened."""


class Dataset:
    def __init__(self, dataset_id, entry):
        if not isinstance(entry, dict):
            raise SeclaunchDataError("%s: %r is not an object" % (dataset_id, entry))
        self.id = dataset_id
        self.kind = entry.get("kind")
        self.size = entry.get("size")
        self.method = entry.get("method")
        self.entry = entry
        if self.kind not in ("host", "gpu", "sld", "stream"):
            raise SeclaunchDataError("%s: unknown kind %r" % (dataset_id, self.kind))
        if not isinstance(self.size, int) or self.size < 0:
            raise SeclaunchDataError("%s: bad size %r" % (dataset_id, self.size))
        self._map = None
        self._held = {}  # stream: shard -> (mmap, fd)
        self._soft = {}  # stream: shard held by read() alone -> last use
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._reaper = None
        self._files = None  # the file list, from the entry or the data service
        self._index = None  # path -> file entry
        self._shards = None
        self._shard_starts = None

    def __repr__(self):
        return "Dataset(%r, kind=%r, size=%d, method=%r)" % (
            self.id, self.kind, self.size, self.method)

    # ---- host ---------------------------------------------------------
    def _fd(self):
        """The memory file's descriptor: the inherited one while it is still
        open in this process, else one asked of the data service (processes
        started with close_fds, by spawn, by torchrun...)."""
        fd = self.entry.get("fd")
        if isinstance(fd, int) and _inherited_ok(fd, self.size):
            return fd
        if not os.environ.get(SOCKET_ENV):
            raise SeclaunchDataError("%s: cannot map fd %s: not open in this process, and no "
                                     "data service (%s is not set)" % (self.id, fd, SOCKET_ENV))
        return _service_fd(self.id)

    def memoryview(self):
        """A read-only, zero-copy memoryview of the staged plaintext."""
        if self.kind == "stream":
            raise SeclaunchDataError("%s: streamed shard by shard; use files(), open(), "
                                     "read() or iter_files()" % self.id)
        if self.kind == "sld":
            raise SeclaunchDataError("%s: ciphertext for GPU decryption (--gpu-decrypt); use "
                                     "to_device(), cupy() or torch()" % self.id)
        if self.kind != "host":
            raise SeclaunchDataError("%s: staged on the GPU; use cupy() or torch()" % self.id)
        if self.size == 0:
            return memoryview(b"")
        if self._map is None:
            try:
                self._map = mmap.mmap(self._fd(), self.size, flags=mmap.MAP_SHARED,
                                      prot=mmap.PROT_READ)
            except (OSError, ValueError) as e:
                raise SeclaunchDataError("%s: cannot map fd %d: %s" % (self.id, self._fd(), e))
        return memoryview(self._map)

    def bytes(self):
        """A copy of the plaintext as bytes (for small data)."""
        return bytes(self.memoryview())

    def text(self, encoding="utf-8"):
        return self.bytes().decode(encoding)

    def numpy(self, dtype="uint8"):
        """A read-only numpy array over the staged bytes (needs numpy). For a
        .npy file use load_npy(), which reads its header."""
        import numpy  # optional

        return numpy.frombuffer(self.memoryview(), dtype=dtype)

    # ---- files of a sharded dataset -------------------------------------
    def _list(self, key):
        """entry[key] ("files" or "shards"), or, when SECLAUNCH_DATA left it
        out ("files_from": "service", a dataset of many files), the list
        paged from the data service."""
        if key in self.entry:
            v = self.entry[key]
        elif self.entry.get("files_from") == "service":
            v = _ask_pages(self.id, key)
        else:
            v = []
        if not isinstance(v, list):
            raise SeclaunchDataError("%s: %s is not a list" % (self.id, key))
        return v

    def _file_list(self):
        if self._files is None:
            self._files = self._list("files")
        return self._files

    def files(self):
        """The dataset's file paths, in the manifest's order ([] for a
        single-file dataset: the whole dataset is one blob)."""
        return [f["path"] for f in self._file_list()]

    def file_info(self, path):
        if self._index is None:
            self._index = {f.get("path"): f for f in self._file_list()}
        f = self._index.get(path)
        if f is None:
            raise SeclaunchDataError("dataset %r has no file %r" % (self.id, path))
        return f

    def view(self, path=None):
        """A read-only, zero-copy memoryview of one file (or of everything).
        Streamed: the file's shard stays held until release_file(path)
        (a file spread over several shards comes back as a copy)."""
        if self.kind == "stream":
            return self._stream_view(path)
        mv = self.memoryview()
        if path is None:
            return mv
        f = self.file_info(path)
        off, size = f["offset"], f["size"]
        if off < 0 or size < 0 or off + size > self.size:
            raise SeclaunchDataError("%s: %s lies outside the dataset" % (self.id, path))
        return mv[off:off + size]

    def read(self, path):
        """A copy of one file's bytes. Streamed: the file's shard stays held
        for a quarter of a second after the read (the next read() in it is
        a look-up), then is given back, as it is at once when a read()
        moves to another shard; a shard view() or iter_files() holds is
        left as it is (giving it back would zero the pages under their
        views). seclaunch keeps a given-back shard staged for --linger
        seconds, so coming back to it later does not decrypt it again."""
        if self.kind != "stream":
            return bytes(self.view(path))
        self._own()
        with self._lock:
            self._note_read(path)
            self._in_read = True
            try:
                return self._read_locked(path)
            finally:
                self._in_read = False

    def _read_locked(self, path):
        f, shards = self._shards_of(path)
        if len(shards) != 1 or (shards[0]["index"] in self._held and
                                shards[0]["index"] not in self._soft):
            # spread over shards (one at a time, as view() reads it), or
            # held by view()/iter_files: not read()'s to give back
            idx = [sh["index"] for sh in shards]
            held = {i for i in idx if i in self._held}
            b = bytes(self.view(path))
            for i in idx:
                if i not in held:
                    self.release_shard(i)
            return b
        sh = shards[0]
        i = sh["index"]
        for j in list(self._soft):
            if j != i:
                self.release_shard(j)
        m = self._acquire(i)
        self._soft[i] = time.monotonic()
        a = f["offset"] - sh["offset"]
        with memoryview(m) as mv:
            b = bytes(mv[a:a + f["size"]])
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, daemon=True,
                                            name="seclaunch-data-release")
            self._reaper.start()
        return b

    def _reap(self):
        """Gives back the shards read() holds once unused for _SOFT_HOLD_S."""
        while True:
            time.sleep(_SOFT_HOLD_S / 2)
            with self._lock:
                if os.getpid() != self._pid:
                    return
                now = time.monotonic()
                for i, t in list(self._soft.items()):
                    if now - t >= _SOFT_HOLD_S:
                        self.release_shard(i)
                if not self._soft:
                    self._reaper = None
                    return

    def _own(self):
        """In a forked child, forget the shards the parent held: its
        connection holds them, not ours, and the parent giving one back
        zeroes the pages under the mapping the child inherited."""
        if self._pid == os.getpid():
            return
        for m, fd in self._held.values():
            try:
                if hasattr(m, "close"):
                    m.close()
            except BufferError:
                pass
            try:
                os.close(fd)
            except OSError:
                pass
        self._held, self._soft = {}, {}
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._reaper = None

    # ---- stream staging ---------------------------------------------------
    def _shards_of(self, path):
        if path is None:
            raise SeclaunchDataError("%s: streamed; name a file" % self.id)
        f = self.file_info(path)
        lo, hi = f["offset"], f["offset"] + f["size"]
        self._shard_list()
        out = []
        # the shards are back to back: start at the last one that begins at
        # or before the file
        k = max(0, bisect.bisect_right(self._shard_starts, lo) - 1)
        for sh in self._shards[k:]:
            a, b = sh["offset"], sh["offset"] + sh["size"]
            if a >= hi and not (f["size"] == 0 and a <= lo):
                break
            if a < hi and lo < b or (f["size"] == 0 and a <= lo < b):
                out.append(sh)
        return f, out

    def _shard_list(self):
        """The shards, sorted by where they start in the plaintext."""
        if self._shards is None:
            self._shards = sorted(self._list("shards"), key=lambda sh: sh["offset"])
            self._shard_starts = [sh["offset"] for sh in self._shards]
        return self._shards

    def _open_shard(self, shard):
        """One open_shard request: the shard's mapping, now held, or None
        while seclaunch is still decrypting it (it was asked for: seclaunch
        decrypts it next)."""
        ans, fds = _stream_ask({"op": "open_shard", "dataset": self.id, "shard": shard})
        if not ans.get("ok"):
            for fd in fds:
                os.close(fd)
            if ans.get("error") != "not-ready":
                raise SeclaunchDataError("%s shard %d: %s" % (
                    self.id, shard, ans.get("message") or ans.get("error")))
            return None
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise SeclaunchDataError("%s shard %d: no descriptor" % (self.id, shard))
        size = ans.get("size", 0)
        m = mmap.mmap(fds[0], size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) if size else b""
        self._held[shard] = (m, fds[0])
        return m

    def _acquire(self, shard):
        self._own()
        if shard in self._held:
            return self._held[shard][0]
        import time
        delay, waited = 0.002, 0.0
        m = self._open_shard(shard)
        if self.__dict__.get("_in_read"):
            self._note_acquire(shard, m is None)
        while m is None:
            if waited > 3600:
                raise SeclaunchDataError("%s shard %d: not staged after an hour (is the "
                                         "--window held by other readers?)" % (self.id, shard))
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.02)  # the shard is usually a few ms away
            m = self._open_shard(shard)
        return m

    def _ask_ahead(self, shard):
        """Asks for a shard that will be read soon: True when it was staged
        already (now held), False when seclaunch decrypts it now."""
        self._own()
        with self._lock:
            if shard in self._held:
                return True
            return self._open_shard(shard) is not None

    def _read_held(self, path):
        """A copy of a file whose first shard this process holds."""
        with self._lock:
            f, shards = self._shards_of(path)
            if len(shards) == 1 and shards[0]["index"] in self._held:
                sh = shards[0]
                m = self._held[sh["index"]][0]
                a = f["offset"] - sh["offset"]
                return bytes(m[a:a + f["size"]])
            return bytes(self._stream_view_locked(path))

    # A process that goes back to a shard it already read in this pass (no
    # file read twice yet) and finds it wiped has it decrypted again: a
    # random order across more shards than the window holds (map-style
    # DataLoader(shuffle=True)). Said once per process.
    _REFETCH_WARN = 4

    def _note_read(self, path):
        pf = self.__dict__.setdefault("_pass_files", set())
        if path in pf:
            pf.clear()
            self.__dict__["_pass_shards"] = set()
        pf.add(path)

    def _note_acquire(self, shard, wiped):
        ps = self.__dict__.setdefault("_pass_shards", set())
        if shard in ps and wiped:
            n = self.__dict__["_refetched"] = self.__dict__.get("_refetched", 0) + 1
            if n == self._REFETCH_WARN and not _warned.get(self.id):
                _warned[self.id] = True
                import warnings
                warnings.warn(
                    "seclaunch_data: dataset %r is streamed and read in a random order across "
                    "more shards than --window holds: its shards are decrypted again each time "
                    "the reads come back to them (%d so far in this process). Read it with "
                    "TorchFiles(%r, shuffle=True) (and set_epoch(n) each epoch) instead of a "
                    "map-style DataLoader(shuffle=True), or raise --window" % (
                        self.id, n, self.id), RuntimeWarning, stacklevel=4)
        ps.add(shard)

    def release_shard(self, shard):
        """Gives a streamed shard back: seclaunch wipes it once every reader
        has (after --linger)."""
        self._own()
        with self._lock:
            self._release_locked(shard)

    def _release_locked(self, shard):
        self._soft.pop(shard, None)
        held = self._held.pop(shard, None)
        if held is None:
            return
        m, fd = held
        if hasattr(m, "close"):
            try:
                m.close()
            except BufferError:
                # a view of it is still alive: the mapping goes with the last
                # view (seclaunch zeroes the pages once every reader released)
                pass
        os.close(fd)
        _stream_ask({"op": "release_shard", "dataset": self.id, "shard": shard})

    def release_file(self, path):
        for sh in self._shards_of(path)[1]:
            self.release_shard(sh["index"])

    def _stream_view(self, path):
        self._own()
        with self._lock:
            return self._stream_view_locked(path)

    def _stream_view_locked(self, path):
        f, shards = self._shards_of(path)
        if f["size"] == 0:
            return memoryview(b"")
        if len(shards) == 1:
            sh = shards[0]
            m = self._acquire(sh["index"])
            # a view keeps its shard held until release_file / release_shard
            self._soft.pop(sh["index"], None)
            a = f["offset"] - sh["offset"]
            return memoryview(m)[a:a + f["size"]]
        # a file spread over shards: one shard at a time, so the window
        # need hold only the largest shard
        parts = []
        for sh in shards:
            held = sh["index"] in self._held
            m = self._acquire(sh["index"])
            a = max(f["offset"], sh["offset"]) - sh["offset"]
            b = min(f["offset"] + f["size"], sh["offset"] + sh["size"]) - sh["offset"]
            parts.append(bytes(memoryview(m)[a:b]))
            if not held:
                self.release_shard(sh["index"])
        return memoryview(b"".join(parts))

    def iter_files(self, paths=None):
        """(path, bytes view) for each file in order; a streamed shard is
        given back as soon as no later file needs it."""
        paths = list(paths) if paths is not None else self.files()
        for k, p in enumerate(paths):
            yield p, self.view(p)
            if self.kind == "stream":
                later = set()
                for q in paths[k + 1:k + 2]:
                    later.update(sh["index"] for sh in self._shards_of(q)[1])
                for sh in self._shards_of(p)[1]:
                    if sh["index"] not in later:
                        self.release_shard(sh["index"])

    def open(self, path=None):
        """A read-only binary file object over one file (zero-copy)."""
        return MemFile(self.view(path), name=path or self.id)

    def load_npy(self, path=None):
        """A .npy file as a read-only numpy array over the staged bytes."""
        return _npy(self.view(path), path or self.id)

    # ---- gpu ----------------------------------------------------------
    # kind "host" with a "gpu" member (--stage gpu) or kind "sld"
    # (--gpu-decrypt): the job's own CUDA context uploads the data through
    # libseclaunch_data.so (pinned pool; GPU-side AES-GCM for "sld").
    # kind "gpu" (--stage gpu-ipc): device memory opened by CUDA IPC.
    def to_device(self, device=None, ptr=None):
        """Fills device memory with the plaintext through libseclaunch_data.so.

        ptr None: the library allocates in the current (or the device's
        primary) CUDA context and the returned DeviceBuffer owns it; else ptr
        is a device pointer to at least self.size bytes the caller owns."""
        if self.kind == "gpu":
            raise SeclaunchDataError("%s: staged with --stage gpu-ipc; use cupy() or torch()"
                                     % self.id)
        lib = _jobside(self.entry)
        dev = self._device(device)
        return lib.fill(self.id, dev, ptr, self.size)

    def _device(self, device):
        if isinstance(device, int):
            return device
        if isinstance(device, str) and ":" in device:
            return int(device.split(":", 1)[1])
        g = self.entry.get("gpu")
        if isinstance(g, dict) and isinstance(g.get("device"), int):
            return g["device"]
        return self.entry.get("device", 0) if isinstance(self.entry.get("device", 0), int) else 0

    def _handle(self):
        h = self.entry.get("ipc_handle")
        if not isinstance(h, str) or len(h) != 128:
            raise SeclaunchDataError("%s: bad ipc_handle" % self.id)
        return bytes.fromhex(h)

    def cupy(self):
        """A cupy uint8 array on the GPU holding the plaintext (needs cupy)."""
        if self.kind == "host" and not isinstance(self.entry.get("gpu"), dict):
            raise SeclaunchDataError("%s: staged in host memory; use memoryview()" % self.id)
        import cupy  # optional

        if self.kind != "gpu":
            with cupy.cuda.Device(self._device(None)):
                arr = cupy.empty((self.size,), dtype=cupy.uint8)
                cupy.cuda.runtime.deviceSynchronize()
                self.to_device(self._device(None), arr.data.ptr if self.size else None)
                return arr
        with cupy.cuda.Device(self.entry.get("device", 0)):
            ptr = cupy.cuda.runtime.ipcOpenMemHandle(self._handle())
            mem = cupy.cuda.UnownedMemory(ptr, self.size, self)
            return cupy.ndarray((self.size,), dtype=cupy.uint8,
                                memptr=cupy.cuda.MemoryPointer(mem, 0))

    def torch(self, device="cuda"):
        """A torch uint8 CUDA tensor holding the plaintext (needs torch)."""
        if self.kind == "host" and not isinstance(self.entry.get("gpu"), dict):
            raise SeclaunchDataError("%s: staged in host memory; use memoryview()" % self.id)
        import torch  # optional

        if self.kind != "gpu":
            dev = torch.device(device)
            if dev.index is None:
                dev = torch.device("cuda", self._device(None))
            t = torch.empty((self.size,), dtype=torch.uint8, device=dev)
            torch.cuda.synchronize(dev)
            with torch.cuda.device(dev):
                self.to_device(dev.index, t.data_ptr() if self.size else None)
            return t
        try:
            return torch.as_tensor(self.cupy(), device="cuda:%d" % self.entry.get("device", 0))
        except ImportError:
            pass
        torch.cuda.init()
        ptr = _cudart_ipc_open(self._handle(), self.entry.get("device", 0))
        return torch.as_tensor(_CudaArray(ptr, self.size),
                               device="cuda:%d" % self.entry.get("device", 0))


class SeclaunchDataIntegrityError(SeclaunchDataError):
    """A chunk failed authentication on the GPU (--gpu-decrypt): the device
    buffer was cleared. Jobs should exit with exit_code (6, seclaunch's
    integrity failure)."""

    exit_code = 6


class DeviceBuffer:
    """Device memory libseclaunch_data.so filled. Owned (allocated by the
    library) buffers are cleared and freed by free() or when collected."""

    def __init__(self, lib, ptr, size, owned, stats):
        self._lib, self.ptr, self.size, self.owned, self.stats = lib, ptr, size, owned, stats

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.ptr, True), "version": 2}

    def clear(self):
        self._lib.call("sldata_device_clear", self.ptr, self.size)

    def free(self):
        if self.owned and self.ptr:
            p, self.ptr = self.ptr, 0
            self._lib.call("sldata_device_free", p, self.size)

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


class _Stats(ctypes.Structure):
    _fields_ = [("bytes_copied", ctypes.c_uint64), ("copies", ctypes.c_uint64),
                ("min_copy", ctypes.c_uint64), ("max_copy", ctypes.c_uint64),
                ("pinned_buffers", ctypes.c_uint32), ("streams", ctypes.c_uint32),
                ("kernel_launches", ctypes.c_uint64), ("seconds", ctypes.c_double)]


class _Jobside:
    """ctypes over libseclaunch_data.so (jobside/seclaunch_data.h)."""

    def __init__(self, path):
        import ctypes

        self.ct = ctypes
        self.path = path
        self.lib = ctypes.CDLL(path)
        L, c = self.lib, ctypes
        L.sldata_open.argtypes = [c.c_char_p, c.POINTER(c.c_void_p)]
        L.sldata_close.argtypes = [c.c_void_p]
        L.sldata_to_device.argtypes = [c.c_void_p, c.c_int, c.c_uint64, c.POINTER(c.c_uint64)]
        L.sldata_device_clear.argtypes = [c.c_uint64, c.c_uint64]
        L.sldata_device_free.argtypes = [c.c_uint64, c.c_uint64]
        L.sldata_get_stats.argtypes = [c.c_void_p, c.POINTER(_Stats)]
        L.sldata_last_error.restype = c.c_char_p

    def _raise(self, rc, what):
        msg = "%s: %s" % (what, (self.lib.sldata_last_error() or b"").decode("utf-8", "replace"))
        if rc == 6:
            raise SeclaunchDataIntegrityError(msg)
        raise SeclaunchDataError(msg)

    def call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            self._raise(rc, name)

    def fill(self, dataset_id, device, ptr, size):
        c = self.ct
        h = c.c_void_p()
        rc = self.lib.sldata_open(dataset_id.encode(), c.byref(h))
        if rc != 0:
            self._raise(rc, dataset_id)
        try:
            out = c.c_uint64(0)
            rc = self.lib.sldata_to_device(h, device, ptr or 0, c.byref(out))
            if rc != 0:
                self._raise(rc, dataset_id)
            st = _Stats()
            self.lib.sldata_get_stats(h, c.byref(st))
            stats = {k: getattr(st, k) for k, _ in _Stats._fields_}
        finally:
            self.lib.sldata_close(h)
        return DeviceBuffer(self, out.value, size, ptr is None, stats)


_JOBSIDE = {}


def _jobside(entry=None):
    """libseclaunch_data.so: the entry's "gpu"."library", $SECLAUNCH_DATA_LIB,
    or the loader's search path; SeclaunchDataError saying why otherwise."""
    import ctypes.util

    cands = []
    g = entry.get("gpu") if isinstance(entry, dict) else None
    if isinstance(g, dict) and isinstance(g.get("library"), str):
        cands.append(g["library"])
    if os.environ.get("SECLAUNCH_DATA_LIB"):
        cands.append(os.environ["SECLAUNCH_DATA_LIB"])
    cands += [ctypes.util.find_library("seclaunch_data"), "libseclaunch_data.so"]
    errs = []
    for p in cands:
        if not p:
            continue
        if p in _JOBSIDE:
            return _JOBSIDE[p]
        try:
            _JOBSIDE[p] = _Jobside(p)
            return _JOBSIDE[p]
        except OSError as e:
            errs.append("%s: %s" % (p, e))
    raise SeclaunchDataError("libseclaunch_data.so could not be loaded, so data cannot be put "
                             "on the GPU from this process (%s); host-staged data is still "
                             "readable with memoryview()" % ("; ".join(errs) or "not found"))


class _CudaArray:
    """Just enough of __cuda_array_interface__ for torch.as_tensor."""

    def __init__(self, ptr, size):
        self.__cuda_array_interface__ = {
            "shape": (size,), "typestr": "|u1", "data": (ptr, True), "version": 2}


def _cudart_ipc_open(handle, device):
    import ctypes
    import ctypes.util

    names = [ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12",
             "libcudart.so.11.0"]
    lib = None
    for n in names:
        if not n:
            continue
        try:
            lib = ctypes.CDLL(n)
            break
        except OSError:
            continue
    if lib is None:
        raise SeclaunchDataError("no CUDA runtime library to open an IPC handle")
    if lib.cudaSetDevice(ctypes.c_int(device)) != 0:
        raise SeclaunchDataError("cudaSetDevice(%d) failed" % device)

    class Handle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    ptr = ctypes.c_void_p()
    rc = lib.cudaIpcOpenMemHandle(ctypes.byref(ptr), Handle(handle), ctypes.c_uint(1))
    if rc != 0:
        raise SeclaunchDataError("cudaIpcOpenMemHandle failed (%d)" % rc)
    return ptr.value


def _inherited_ok(fd, size):
    """True when fd is this process's own copy of the staged memory file."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    import stat as _stat
    return _stat.S_ISREG(st.st_mode) and st.st_size == size


_fds = {}


def _with_token(req):
    """Under `seclaunch serve` every request carries the step's token."""
    tok = os.environ.get(TOKEN_ENV)
    if tok:
        req = dict(req, token=tok)
    return req


def _ask(req):
    req = _with_token(req)
    path = os.environ.get(SOCKET_ENV)
    if not path:
        raise SeclaunchDataError("%s is not set: no data service (run the job with "
                                 "`seclaunch run`)" % SOCKET_ENV)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        s.send(json.dumps(req).encode())
        msg, fds, _flags, _addr = socket.recv_fds(s, 65536, 1)
    except OSError as e:
        raise SeclaunchDataError("data service %s: %s" % (path, e))
    finally:
        s.close()
    try:
        ans = json.loads(msg.decode())
    except ValueError:
        ans = None
    if not isinstance(ans, dict) or not ans.get("ok"):
        for fd in fds:
            os.close(fd)
        raise SeclaunchDataError("data service refused: %s" % (
            ans.get("message") if isinstance(ans, dict) else "no answer"))
    return ans, fds


def _ask_pages(dataset_id, key):
    """Every entry of a dataset's "files" or "shards" list, page by page on
    one connection (the list of a dataset of many files does not fit one
    message, nor SECLAUNCH_DATA)."""
    path = os.environ.get(SOCKET_ENV)
    if not path:
        raise SeclaunchDataError("%s: its %s are listed by the data service, and %s is not "
                                 "set" % (dataset_id, key, SOCKET_ENV))
    out, start = [], 0
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        while True:
            s.send(json.dumps(_with_token({"op": key, "dataset": dataset_id,
                                           "start": start})).encode())
            ans = json.loads(s.recv(1 << 17).decode())
            if not isinstance(ans, dict) or not ans.get("ok"):
                raise SeclaunchDataError("data service: %s of %s: %s" % (
                    key, dataset_id, ans.get("message") if isinstance(ans, dict) else ans))
            page = ans.get(key)
            if not isinstance(page, list):
                raise SeclaunchDataError("data service: %s of %s: no list" % (key, dataset_id))
            out.extend(page)
            nxt = ans.get("next")
            if nxt is None:
                break
            if not isinstance(nxt, int) or nxt <= start:
                raise SeclaunchDataError("data service: %s of %s: bad next %r" % (
                    key, dataset_id, nxt))
            start = nxt
    except (OSError, ValueError) as e:
        raise SeclaunchDataError("data service %s: %s" % (path, e))
    finally:
        s.close()
    total = ans.get("total")
    if total != len(out):
        raise SeclaunchDataError("data service: %s of %s: %d of %r entries" % (
            key, dataset_id, len(out), total))
    return out


_stream_sock = {}
_warned = {}  # dataset id -> the random-order warning was given in this process


_stream_lock = threading.Lock()


def _stream_ask(req):
    """A request on this process's own connection to the data service: the
    shards it holds are tied to the connection (given back when it closes).
    One request at a time (read()'s release thread shares the connection)."""
    with _stream_lock:
        return _stream_ask_locked(req)


def _stream_locks_after_fork():
    global _stream_lock
    _stream_lock = threading.Lock()


os.register_at_fork(after_in_child=_stream_locks_after_fork)


def _stream_connect():
    path = os.environ.get(SOCKET_ENV)
    if not path:
        raise SeclaunchDataError("%s is not set: no data service" % SOCKET_ENV)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    except OSError as e:
        s.close()
        raise SeclaunchDataError("data service %s: %s" % (path, e))
    return s


def _stream_ask_locked(req):
    req = _with_token(req)
    pid = os.getpid()
    for attempt in (0, 1):
        s = _stream_sock.get(pid)
        if s is None:
            s = _stream_connect()
            _stream_sock.clear()
            _stream_sock[pid] = s
        try:
            s.send(json.dumps(req).encode())
            msg, fds, _flags, _addr = socket.recv_fds(s, 65536, 1)
        except OSError as e:
            msg, fds, err = b"", [], e
        else:
            err = None
        if msg or attempt == 1:
            break
        # the service closes a connection that held no shard and asked
        # nothing for a long while (its idle timeout): the request never
        # reached it, so it is asked again once on a new connection
        _stream_sock.pop(pid, None)
        s.close()
    if not msg:
        raise SeclaunchDataError("data service: %s" % (err or "connection closed"))
    try:
        ans = json.loads(msg.decode())
    except ValueError as e:
        raise SeclaunchDataError("data service: %s" % e)
    if ans.get("error") == "refused":
        raise SeclaunchDataError("data service refused: %s" % ans.get("message"))
    return ans, fds


def _service_fd(dataset_id):
    """A descriptor of the dataset's memory file from the data service,
    asked once per process."""
    key = (os.getpid(), dataset_id)
    if key not in _fds:
        _ans, fds = _ask({"op": "open", "dataset": dataset_id})
        if len(fds) != 1:
            raise SeclaunchDataError("data service sent no descriptor for %r" % dataset_id)
        _fds[key] = fds[0]
    return _fds[key]


class MemFile(io.RawIOBase):
    """A read-only file object over a memoryview: read, readinto, seek,
    tell, and getbuffer() for zero-copy access."""

    def __init__(self, view, name=None):
        super().__init__()
        self._v = view
        self._pos = 0
        self.name = name

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        n = min(len(b), len(self._v) - self._pos)
        if n <= 0:
            return 0
        b[:n] = self._v[self._pos:self._pos + n]
        self._pos += n
        return n

    def read(self, n=-1):
        if n is None or n < 0:
            n = len(self._v) - self._pos
        n = max(0, min(n, len(self._v) - self._pos))
        out = bytes(self._v[self._pos:self._pos + n])
        self._pos += n
        return out

    def readall(self):
        return self.read(-1)

    def seek(self, off, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._v)}[whence]
        if base + off < 0:
            raise ValueError("negative seek position")
        self._pos = base + off
        return self._pos

    def tell(self):
        return self._pos

    def getbuffer(self):
        return self._v


def _npy(view, name):
    """Parses a .npy header (format versions 1-3) over view."""
    if bytes(view[:6]) != b"\x93NUMPY" or len(view) < 10:
        raise SeclaunchDataError("%s: not a .npy file" % name)
    major = view[6]
    if major == 1:
        hlen = struct.unpack("<H", bytes(view[8:10]))[0]
        start = 10
    elif major in (2, 3):
        hlen = struct.unpack("<I", bytes(view[8:12]))[0]
        start = 12
    else:
        raise SeclaunchDataError("%s: .npy version %d" % (name, major))
    try:
        hdr = ast.literal_eval(bytes(view[start:start + hlen]).decode("latin1" if major < 3
                                                                         else "utf-8"))
        descr, fortran, shape = hdr["descr"], hdr["fortran_order"], tuple(hdr["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError) as e:
        raise SeclaunchDataError("%s: bad .npy header: %s" % (name, e))
    import numpy  # optional

    dt = numpy.dtype(descr)
    count = 1
    for d in shape:
        count *= d
    arr = numpy.frombuffer(view[start + hlen:], dtype=dt, count=count)
    return arr.reshape(shape, order="F" if fortran else "C")


def files(dataset_id):
    """The file paths of a staged dataset."""
    return get(dataset_id).files()


def open(dataset_id, path=None):  # noqa: A001 (the module's own open)
    """A read-only binary file object over one file of a staged dataset."""
    return get(dataset_id).open(path)


def load_npy(dataset_id, path=None):
    """A .npy file of a staged dataset as a read-only numpy array."""
    return get(dataset_id).load_npy(path)


def _split(items, worker_id, num_workers):
    """This rank's and this worker's share: item i goes to exactly one
    (rank, worker) of RANK/WORLD_SIZE x DataLoader workers."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    slots = world * num_workers
    me = rank * num_workers + worker_id
    return items[me::slots]


class TorchFiles:
    """A map-style dataset (for torch.utils.data.DataLoader) over the files
    of a staged dataset: item i is transform(bytes of file i). Pickles as
    (dataset id, paths, transform), so workers started by spawn reopen the
    data through the data service.

    TorchFiles(..., shuffle=True[, seed, resident, with_path]) is instead an
    IterableDataset in a shard-aware random order (TorchShuffledFiles; call
    its set_epoch(n) each epoch): a DataLoader(shuffle=True) over the
    map-style one reads a streamed dataset in a random order across all its
    shards, which decrypts them again and again when it is larger than the
    window."""

    def __new__(cls, dataset_id=None, paths=None, transform=None, shuffle=False, seed=0,
                resident=None, with_path=False):
        if shuffle:
            return _shuffled_class()(dataset_id, paths, transform, seed, resident, with_path)
        return super().__new__(cls)

    def __init__(self, dataset_id, paths=None, transform=None, shuffle=False, seed=0,
                 resident=None, with_path=False):
        self.dataset_id = dataset_id
        self.paths = list(paths) if paths is not None else files(dataset_id)
        self.transform = transform
        self._ds = None

    def __getstate__(self):
        return {"dataset_id": self.dataset_id, "paths": self.paths,
                "transform": self.transform, "_ds": None}

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self._ds is None:
            self._ds = get(self.dataset_id)
        b = self._ds.read(self.paths[i])
        return self.transform(b) if self.transform is not None else b


def _rank_world():
    """(rank, world size): torch.distributed's when it is initialised, else
    RANK / WORLD_SIZE (torchrun sets them; DataLoader workers inherit them),
    else (0, 1)."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _home_shards(files, shards):
    """For each file (in list order) the index in `shards` (sorted by offset)
    of the shard its first byte is in, and whether any file spans shards."""
    starts = [sh["offset"] for sh in shards]
    home, spans = [], False
    for f in files:
        k = max(0, bisect.bisect_right(starts, f["offset"]) - 1)
        home.append(k)
        if shards and f["size"] > 0 and f["offset"] + f["size"] > shards[k]["offset"] + shards[k]["size"]:
            spans = True
    return home, spans


def shuffle_plan(n_files, home, n_shards, resident, seed, epoch, rank=0, world=1, worker=0,
                 num_workers=1, local_world=None):
    """The files (indices) one (rank, DataLoader worker) reads in one epoch of
    a shard-aware shuffle, in order. home[i]: file i's shard (0..n_shards-1).

    The shards are permuted by (seed, epoch); `resident` of them at a time
    are in a buffer, and each next file is drawn at random among the files
    of the buffered shards; a shard whose files were all drawn leaves it and
    the next one in the permutation enters. Every process of a node computes
    the same sequence and takes its positions (position g: rank g mod the
    node's ranks, worker (g div ranks) mod workers), so together they read
    every file exactly once, the node's processes all drawing from the same
    resident shards (staged once for all of them). With local_world (ranks
    per node, LOCAL_WORLD_SIZE) below world, the shards are split between
    the nodes first (each node streams only its own)."""
    import random

    rng = random.Random("seclaunch-shuffle/%d/%d" % (seed, epoch))
    order = list(range(n_shards))
    rng.shuffle(order)
    if local_world and 0 < local_world < world and world % local_world == 0:
        node, nodes = rank // local_world, world // local_world
        order = order[node::nodes]
        rank, world = rank % local_world, local_world
    by_shard = [[] for _ in range(n_shards)]
    for i in range(n_files):
        by_shard[home[i]].append(i)
    order = [s for s in order if by_shard[s]]
    left = {}
    pool = []
    nxt = 0
    resident = max(1, resident)

    def enter():
        nonlocal nxt
        while len(left) < resident and nxt < len(order):
            s = order[nxt]
            nxt += 1
            left[s] = len(by_shard[s])
            pool.extend(by_shard[s])

    enter()
    out = []
    g = 0
    while pool:
        j = rng.randrange(len(pool))
        pool[j], pool[-1] = pool[-1], pool[j]
        f = pool.pop()
        if g % world == rank and (g // world) % num_workers == worker:
            out.append(f)
        g += 1
        s = home[f]
        left[s] -= 1
        if left[s] == 0:
            del left[s]
            enter()
    return out


def _resident_default(entry, shards, spans, readers):
    """How many shards the shuffle keeps in its buffer: what --window holds
    of the largest shard, less one for the shard staged ahead, one more when
    a file spans shards (read one shard at a time beside the buffer), and one
    more when several processes read (they are a little apart)."""
    largest = max([sh["size"] for sh in shards] or [1]) or 1
    window = entry.get("window")
    fit = window // largest if isinstance(window, int) and window > 0 else len(shards)
    k = fit - 1 - (1 if spans else 0) - (1 if readers > 1 else 0)
    return max(1, min(k, len(shards) or 1))


class _ShardShuffle:
    """One process's pass over its plan: the shards it needs held while it
    reads their files, the next one asked for ahead (so that seclaunch
    decrypts it while this one is read), each given back after its last
    file of this pass."""

    def __init__(self, ds, paths, plan, home_of, ahead):
        self.ds, self.paths, self.plan, self.ahead = ds, paths, plan, ahead
        self.home_of = home_of
        last, first = {}, []
        for t, i in enumerate(plan):
            s = home_of[i]
            if s not in last:
                first.append(s)
            last[s] = t
        self.last, self.first = last, first

    def __iter__(self):
        ds = self.ds
        held, asked = set(), set()
        nxt = 0
        try:
            for t, i in enumerate(self.plan):
                s = self.home_of[i]
                if s not in held:
                    ds._acquire(s)
                    held.add(s)
                    asked.discard(s)
                # the next shard of the plan is asked for now: seclaunch
                # decrypts it while this one is read
                while nxt < len(self.first) and (self.first[nxt] in held or
                                                 len(asked) < self.ahead):
                    n = self.first[nxt]
                    nxt += 1
                    if n not in held and ds._ask_ahead(n):
                        held.add(n)
                    elif n not in held:
                        asked.add(n)
                p = self.paths[i]
                b = ds._read_held(p)
                if self.last[s] == t:
                    # given back before the yield: a DataLoader worker
                    # resumes only when asked for its next batch, and the
                    # other readers may be waiting for this shard's room
                    ds.release_shard(s)
                    held.discard(s)
                yield p, b
        finally:
            for s in held:
                ds.release_shard(s)


def _shuffled_class():
    import torch.utils.data as tud

    class TorchShuffledFiles(tud.IterableDataset):
        """TorchFiles(shuffle=True): an iterable dataset over a staged
        dataset's files in a shard-aware random order (see shuffle_plan):
        a streamed dataset's shards are each decrypted once per epoch.
        set_epoch(n) before each epoch (as with DistributedSampler): the
        order is a function of (seed, epoch)."""

        def __init__(self, dataset_id, paths=None, transform=None, seed=0, resident=None,
                     with_path=False):
            super().__init__()
            self.dataset_id = dataset_id
            self.paths = list(paths) if paths is not None else None
            self.transform = transform
            self.seed = seed
            self.resident = resident
            self.with_path = with_path
            self.epoch = 0
            self._rw = _rank_world()

        def set_epoch(self, epoch):
            self.epoch = int(epoch)

        def __len__(self):
            # this rank's share (all its DataLoader workers together)
            rank, world = self._rank_world()
            n = len(self._paths())
            return len(range(rank, n, world))

        def _rank_world(self):
            try:
                import torch.distributed as dist
                if dist.is_available() and dist.is_initialized():
                    return dist.get_rank(), dist.get_world_size()
            except ImportError:
                pass
            if "RANK" in os.environ or "WORLD_SIZE" in os.environ:
                return _rank_world()
            return self._rw

        def _paths(self):
            return self.paths if self.paths is not None else files(self.dataset_id)

        def plan(self, worker=0, num_workers=1):
            """(dataset, paths, file indices to read, each file's shard)."""
            ds = get(self.dataset_id)
            paths = self._paths()
            rank, world = self._rank_world()
            lw = os.environ.get("LOCAL_WORLD_SIZE")
            lw = int(lw) if lw and lw.isdigit() else None
            if ds.kind != "stream":
                # staged whole: every file is resident, one shard of all
                home, spans = [0] * len(paths), False
                n_shards, k = 1, 1
            else:
                shards = ds._shard_list()
                home, spans = _home_shards([ds.file_info(p) for p in paths], shards)
                n_shards = len(shards)
                readers = (lw or world) * num_workers
                k = self.resident or _resident_default(ds.entry, shards, spans, readers)
                self._index = [sh["index"] for sh in shards]
            order = shuffle_plan(len(paths), home, n_shards, k, self.seed, self.epoch, rank,
                                 world, worker, num_workers, lw)
            return ds, paths, order, home

        def __iter__(self):
            info = tud.get_worker_info()
            wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
            ds, paths, order, home = self.plan(wid, nw)
            if ds.kind != "stream":
                gen = ((paths[i], ds.read(paths[i])) for i in order)
            else:
                index = self._index
                gen = iter(_ShardShuffle(ds, paths, order, [index[h] for h in home], 1))
            for p, b in gen:
                item = self.transform(b) if self.transform is not None else b
                yield (p, item) if self.with_path else item

    TorchShuffledFiles.__module__ = __name__
    TorchShuffledFiles.__qualname__ = "TorchShuffledFiles"
    globals()["TorchShuffledFiles"] = TorchShuffledFiles
    return TorchShuffledFiles


def __getattr__(name):
    # torch is imported only when the iterable dataset is used; the class is
    # made once per process under its module-level name, so pickle finds it
    if name == "TorchShuffledFiles":
        return _shuffled_class()
    if name == "TorchIterableFiles":
        import torch.utils.data as tud

        class TorchIterableFiles(tud.IterableDataset):
            """An iterable dataset over the files of a staged dataset, split
            between ranks (RANK/WORLD_SIZE) and DataLoader workers: every file
            is yielded exactly once across all of them."""

            def __init__(self, dataset_id, paths=None, transform=None):
                super().__init__()
                self.dataset_id = dataset_id
                self.paths = list(paths) if paths is not None else files(dataset_id)
                self.transform = transform

            def __iter__(self):
                info = tud.get_worker_info()
                wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
                ds = get(self.dataset_id)
                for p, v in ds.iter_files(_split(self.paths, wid, nw)):
                    b = bytes(v)
                    yield (p, self.transform(b) if self.transform is not None else b)

        TorchIterableFiles.__module__ = __name__
        TorchIterableFiles.__qualname__ = "TorchIterableFiles"
        globals()["TorchIterableFiles"] = TorchIterableFiles
        return TorchIterableFiles
    raise AttributeError(name)


_cache = {}


def datasets():
    """Every staged dataset, by dataset id (made once per process: each keeps
    its mapping and file index, so opening a file is a dictionary look-up
    and a view into a mapping that is already there)."""
    # SECLAUNCH_DATA is read once per process: reading os.environ decodes
    # the whole value again, and a job opening many files would pay for it
    # on every open
    pid = os.getpid()
    if pid not in _cache:
        raw = os.environ.get(ENV)
        if raw is None and os.environ.get(SOCKET_ENV):
            # a process given only the socket (and token) of `seclaunch serve`
            ans, _fds = _ask({"op": "list"})
            parsed = {k: Dataset(k, v) for k, v in ans.get("datasets", {}).items()}
        elif raw is None:
            raise SeclaunchDataError("%s is not set: run this job with `seclaunch run`" % ENV)
        else:
            parsed = _parse(raw)
        _cache.clear()
        _cache[pid] = parsed
    return dict(_cache[pid])


def _parse(raw):
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise SeclaunchDataError("%s is not JSON: %s" % (ENV, e))
    if not isinstance(doc, dict):
        raise SeclaunchDataError("%s is not a JSON object" % ENV)
    return {k: Dataset(k, v) for k, v in doc.items()}


def get(dataset_id):
    """One staged dataset by id."""
    all_ = datasets()
    if dataset_id not in all_:
        raise SeclaunchDataError("dataset %r was not staged (have: %s)" % (
            dataset_id, ", ".join(sorted(all_)) or "none"))
    return all_[dataset_id]


def output_dir(name=None):
    """The in-memory output folder (SECLAUNCH_OUTPUT_DIR), or NAME's folder
    in it: what is written there is sealed to the output's destination."""
    root = os.environ.get("SECLAUNCH_OUTPUT_DIR")
    if not root:
        raise SeclaunchDataError("SECLAUNCH_OUTPUT_DIR is not set (no --output)")
    return root if name is None else os.path.join(root, name)


def _output_path(name, path):
    """NAME's folder (a declared output) and PATH checked inside it."""
    folder = output_dir(name)
    if not name or "/" in name or name.startswith(".") or not os.path.isdir(folder):
        have = sorted(e for e in os.listdir(output_dir())
                      if not e.startswith(".") and os.path.isdir(os.path.join(output_dir(), e)))
        raise SeclaunchDataError("output %r was not declared (run --output NAME=DEST; have: %s)"
                                 % (name, ", ".join(have) or "none"))
    parts = path.split("/") if isinstance(path, str) else []
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) \
            or "\0" in path:
        raise SeclaunchDataError("output %s: path %r must be relative, without '.', '..' or "
                                 "empty parts" % (name, path))
    return folder, os.path.join(folder, *parts)


class OutputFile(io.BufferedWriter):
    """A file being written into an output: it lives in the output folder's
    memory (a tmpfs, never a disk) under a hidden name outside every output,
    and becomes NAME/PATH only when closed, so a checkpoint never seals half
    of it. Leaving a `with` block by an exception discards it."""

    def __init__(self, raw, tmp, final):
        super().__init__(raw, buffer_size=1 << 20)
        self._tmp, self._final, self._discarded = tmp, final, False

    @property
    def path(self):
        return self._final

    def close(self):
        if self.closed:
            return
        try:
            super().close()
        finally:
            if not self._discarded:
                os.makedirs(os.path.dirname(self._final), exist_ok=True)
                os.replace(self._tmp, self._final)

    def discard(self):
        """Drops what was written; nothing reaches the output."""
        self._discarded = True
        try:
            super().close()
        finally:
            try:
                os.unlink(self._tmp)
            except FileNotFoundError:
                pass

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self.discard()
        else:
            self.close()
        return False


def create(name, path):
    """A new writable binary file that becomes PATH in output NAME (a
    declared --output) once closed; sealed at the next checkpoint, at exit
    or on preemption. Its bytes are in memory only (the in-memory output
    folder). An existing PATH is replaced when the new file is closed."""
    import secrets
    _, final = _output_path(name, path)
    tmp = os.path.join(output_dir(), ".seclaunch-partial-%s" % secrets.token_hex(8))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    return OutputFile(io.FileIO(fd, "wb", closefd=True), tmp, final)


def save(obj, name, path, checkpoint_now=False):
    """torch.save(obj) into output NAME as PATH (create()); with
    checkpoint_now, seals every output right after (checkpoint())."""
    import torch
    with create(name, path) as f:
        torch.save(obj, f)
    if checkpoint_now:
        return checkpoint()
    return None


def load(name, path, **kwargs):
    """torch.load of PATH in output NAME: what --resume restored, or what
    this job saved; kwargs go to torch.load (map_location, weights_only)."""
    import torch
    _, p = _output_path(name, path)
    with _builtin_open(p, "rb") as f:
        return torch.load(f, **kwargs)


def checkpoint(timeout=600.0):
    """Asks seclaunch to seal every output now, as a new checkpoint, and
    waits until it has: close the files first. Returns the checkpoint count;
    raises SeclaunchDataError when sealing failed."""
    import builtins
    import time
    root = output_dir()
    status = os.path.join(root, ".seclaunch-checkpoint")

    def count():
        try:
            with builtins.open(status) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    before = count()
    n_before = int(before.split()[0]) if before else 0
    req = os.path.join(root, ".seclaunch-checkpoint-request")
    with builtins.open(req, "w") as f:
        f.write("1")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = count()
        if now and int(now.split()[0]) > n_before:
            if now.split()[1] != "ok":
                raise SeclaunchDataError("checkpoint failed: " + now.strip())
            return int(now.split()[0])
        time.sleep(0.02)
    raise SeclaunchDataError("checkpoint: no answer from seclaunch")


if __name__ == "__main__":
    for name, ds in sorted(datasets().items()):
        print("%s\t%s\t%d bytes\t%s" % (name, ds.kind, ds.size, ds.method))
