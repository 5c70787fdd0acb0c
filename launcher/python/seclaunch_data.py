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
disk). Map the descriptor number, not the path: a memfd_secret file cannot be
reopened through /proc/self/fd. Standard library only; numpy, cupy and torch
are used when installed. See docs/job-interface.md.

    import seclaunch_data as sd
    for name, ds in sd.datasets().items():
        view = ds.memoryview()          # zero-copy, read-only
        rows = ds.text().splitlines()   # convenience for small text data
"""

import ctypes
import json
import mmap
import os

__all__ = ["Dataset", "DeviceBuffer", "datasets", "get", "SeclaunchDataError",
           "SeclaunchDataIntegrityError"]

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
        if self.kind not in ("host", "gpu", "sld"):
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
        """A read-only numpy array over the staged bytes (needs numpy)."""
        import numpy  # optional

        return numpy.frombuffer(self.memoryview(), dtype=dtype)

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
