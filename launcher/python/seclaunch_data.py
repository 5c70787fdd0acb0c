"""Access to the datasets `seclaunch run` staged for this job.

seclaunch hands the job one environment variable, SECLAUNCH_DATA: a JSON
object mapping each dataset id to where its plaintext is:

    host: {"kind": "host", "size": N, "fd": FD, "path": "/proc/self/fd/FD",
           "method": "memfd_secret" | "memfd+mlock" | "memfd"}
    gpu:  {"kind": "gpu", "size": N, "device": D, "ipc_handle": "<128 hex>",
           "method": "gpu"}

Host data is mapped read-only from the inherited descriptor (never a file on
disk). Map the descriptor number, not the path: a memfd_secret file cannot be
reopened through /proc/self/fd. Standard library only; numpy, cupy and torch
are used when installed. See docs/job-interface.md.

    import seclaunch_data as sd
    for name, ds in sd.datasets().items():
        view = ds.memoryview()          # zero-copy, read-only
        rows = ds.text().splitlines()   # convenience for small text data
"""

import json
import mmap
import os

__all__ = ["Dataset", "datasets", "get", "SeclaunchDataError"]

ENV = "SECLAUNCH_DATA"


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
        if self.kind not in ("host", "gpu"):
            raise SeclaunchDataError("%s: unknown kind %r" % (dataset_id, self.kind))
        if not isinstance(self.size, int) or self.size < 0:
            raise SeclaunchDataError("%s: bad size %r" % (dataset_id, self.size))
        self._map = None

    def __repr__(self):
        return "Dataset(%r, kind=%r, size=%d, method=%r)" % (
            self.id, self.kind, self.size, self.method)

    # ---- host ---------------------------------------------------------
    def _fd(self):
        fd = self.entry.get("fd")
        if not isinstance(fd, int):
            raise SeclaunchDataError("%s: host entry without an fd" % self.id)
        return fd

    def memoryview(self):
        """A read-only, zero-copy memoryview of the staged plaintext."""
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
        """A read-only numpy array over the staged bytes (needs numpy)."""
        import numpy  # optional

        return numpy.frombuffer(self.memoryview(), dtype=dtype)

    # ---- gpu ----------------------------------------------------------
    def _handle(self):
        h = self.entry.get("ipc_handle")
        if not isinstance(h, str) or len(h) != 128:
            raise SeclaunchDataError("%s: bad ipc_handle" % self.id)
        return bytes.fromhex(h)

    def cupy(self):
        """A cupy uint8 array over the device buffer (needs cupy)."""
        if self.kind != "gpu":
            raise SeclaunchDataError("%s: staged in host memory; use memoryview()" % self.id)
        import cupy  # optional

        with cupy.cuda.Device(self.entry.get("device", 0)):
            ptr = cupy.cuda.runtime.ipcOpenMemHandle(self._handle())
            mem = cupy.cuda.UnownedMemory(ptr, self.size, self)
            return cupy.ndarray((self.size,), dtype=cupy.uint8,
                                memptr=cupy.cuda.MemoryPointer(mem, 0))

    def torch(self):
        """A torch uint8 CUDA tensor over the device buffer (needs torch)."""
        if self.kind != "gpu":
            raise SeclaunchDataError("%s: staged in host memory; use memoryview()" % self.id)
        import torch  # optional

        try:
            return torch.as_tensor(self.cupy(), device="cuda:%d" % self.entry.get("device", 0))
        except ImportError:
            pass
        torch.cuda.init()
        ptr = _cudart_ipc_open(self._handle(), self.entry.get("device", 0))
        return torch.as_tensor(_CudaArray(ptr, self.size),
                               device="cuda:%d" % self.entry.get("device", 0))


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


def datasets():
    """Every staged dataset, by dataset id."""
    raw = os.environ.get(ENV)
    if raw is None:
        raise SeclaunchDataError("%s is not set: run this job with `seclaunch run`" % ENV)
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


if __name__ == "__main__":
    for name, ds in sorted(datasets().items()):
        print("%s\t%s\t%d bytes\t%s" % (name, ds.kind, ds.size, ds.method))


def output_dir(name=None):
    """The in-memory output folder (SECLAUNCH_OUTPUT_DIR), or NAME's folder
    in it: what is written there is sealed to the output's destination."""
    root = os.environ.get("SECLAUNCH_OUTPUT_DIR")
    if not root:
        raise SeclaunchDataError("SECLAUNCH_OUTPUT_DIR is not set (no --output)")
    return root if name is None else os.path.join(root, name)


def checkpoint(timeout=600.0):
    """Asks seclaunch to seal every output now, as a new checkpoint, and
    waits until it has: close the files first. Returns the checkpoint count;
    raises SeclaunchDataError when sealing failed."""
    import time
    root = output_dir()
    status = os.path.join(root, ".seclaunch-checkpoint")

    def count():
        try:
            with open(status) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    before = count()
    n_before = int(before.split()[0]) if before else 0
    req = os.path.join(root, ".seclaunch-checkpoint-request")
    with open(req, "w") as f:
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
