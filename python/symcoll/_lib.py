"""ctypes bindings of include/symcoll.h: the library, its types, and statuses as exceptions.

Nothing here holds logic of its own: every semantic lives in the C library.
"""
import ctypes
import os
import pathlib

# ---- the library ------------------------------------------------------------------------

def _find_library():
    """SYMCOLL_LIB, else the copy the wheel carries beside this file, else the build tree."""
    here = pathlib.Path(__file__).resolve().parent
    candidates = [os.environ.get("SYMCOLL_LIB")]
    candidates += sorted(str(p) for p in here.glob("libsymcoll.so*"))
    root = here.parent.parent
    candidates += [str(root / "build" / "lib" / "libsymcoll.so"), "libsymcoll.so.0"]
    errors = []
    for c in candidates:
        if not c:
            continue
        try:
            return ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(f"{c}: {e}")
    raise ImportError("cannot load libsymcoll.so (set SYMCOLL_LIB or pip install the package): "
                      + "; ".join(errors))


lib = _find_library()

# ---- statuses ----------------------------------------------------------------------------

class SymcollError(RuntimeError):
    """A failing symcoll status; `status` is the C value, the message its description."""

    status = -10

    def __init__(self, message=None):
        if message is None:
            message = lib.symcoll_status_string(self.status).decode()
        super().__init__(message)


class InvalidArgumentError(SymcollError, ValueError):
    status = -1


class UnsupportedError(SymcollError):
    status = -2


class SystemCallError(SymcollError, OSError):
    status = -3


class CudaError(SymcollError):
    status = -4


class NoMemoryError(SymcollError, MemoryError):
    status = -5


class TimeoutError(SymcollError, TimeoutError):  # noqa: A001 - named after SYMCOLL_ERR_TIMEOUT
    status = -6


class PeerLostError(SymcollError, ConnectionError):
    status = -7


class AbortedError(SymcollError):
    status = -8


class MismatchError(SymcollError):
    status = -9


class InternalError(SymcollError):
    status = -10


_ERRORS = {c.status: c for c in (InvalidArgumentError, UnsupportedError, SystemCallError, CudaError,
                                 NoMemoryError, TimeoutError, PeerLostError, AbortedError, MismatchError,
                                 InternalError)}


def check(status, what=""):
    """Raises the exception named after a failing status, with why (symcoll_last_error)."""
    if status != 0:
        cls = _ERRORS.get(status, SymcollError)
        err = cls()
        why = lib.symcoll_last_error().decode(errors="replace")
        text = f"{what}: {err.args[0]}" if what else err.args[0]
        err.args = (f"{text} ({why})" if why else text,)
        raise err
    return status

# ---- types -------------------------------------------------------------------------------

DEVICE_HOST = -1
SPLIT_NOCOLOR = -1
MAX_RANKS = 64

# DTYPES, OPS, COLLS, ALGOS: read from the library below (its name functions), so they cannot
# drift from the header.

# int oob_allgather(void *ctx, const void *send, void *recv, size_t bytes)
OobAllgather = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class Config(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("job_id", ctypes.c_char_p), ("rank", ctypes.c_int),
                ("nranks", ctypes.c_int), ("device", ctypes.c_int), ("workspace_bytes", ctypes.c_size_t),
                ("timeout_ms", ctypes.c_int)]


class JobConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("job_id", ctypes.c_char_p), ("rank", ctypes.c_int),
                ("nranks", ctypes.c_int), ("local_rank", ctypes.c_int), ("local_nranks", ctypes.c_int),
                ("device", ctypes.c_int), ("workspace_bytes", ctypes.c_size_t), ("timeout_ms", ctypes.c_int),
                ("engine", ctypes.c_int), ("mpi_comm", ctypes.c_void_p), ("oob_allgather", OobAllgather),
                ("oob_ctx", ctypes.c_void_p)]


class CollOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("algo", ctypes.c_int), ("blocks", ctypes.c_int),
                ("threads", ctypes.c_int), ("round_bytes", ctypes.c_size_t), ("scale", ctypes.c_void_p),
                ("scale_on_device", ctypes.c_int)]


class MatmulOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("algo", ctypes.c_int), ("a_out", ctypes.c_void_p)]


class NormOpts(ctypes.Structure):
    """symcoll_norm_opts_t: the options of symcoll_all_reduce_rmsnorm and symcoll_reduce_scatter_rmsnorm."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("algo", ctypes.c_int), ("fp8_out", ctypes.c_void_p),
                ("fp8_scale", ctypes.c_void_p), ("fp8_row_scales", ctypes.c_void_p),
                ("fp8_scale_out", ctypes.c_void_p)]


class DeviceView(ctypes.Structure):
    """symcoll_device_view_t: pass its bytes by value as a kernel argument (see device_view)."""
    _fields_ = [("rank", ctypes.c_int), ("nranks", ctypes.c_int), ("buf", ctypes.c_void_p * MAX_RANKS),
                ("pad", ctypes.c_void_p * MAX_RANKS), ("pad_slots", ctypes.c_uint32),
                ("error", ctypes.c_void_p), ("timeout_ns", ctypes.c_uint64)]


_c = ctypes
_P = _c.c_void_p
_SIG = {
    "symcoll_status_string": (_c.c_char_p, [_c.c_int]),
    "symcoll_last_error": (_c.c_char_p, []),
    "symcoll_version": (_c.c_int, []),
    "symcoll_config_init": (None, [_c.POINTER(Config)]),
    "symcoll_coll_opts_init": (None, [_c.POINTER(CollOpts)]),
    "symcoll_comm_create": (_c.c_int, [_c.POINTER(Config), _c.POINTER(_P)]),
    "symcoll_comm_create_from_env": (_c.c_int, [_c.c_int, _c.POINTER(_P)]),
    "symcoll_job_config_init": (None, [_c.POINTER(JobConfig)]),
    "symcoll_comm_create_job": (_c.c_int, [_c.POINTER(JobConfig), _c.POINTER(_P)]),
    "symcoll_comm_nnodes": (_c.c_int, [_P]),
    "symcoll_comm_split": (_c.c_int, [_P, _c.c_int, _c.c_int, _c.POINTER(_P)]),
    "symcoll_comm_destroy": (_c.c_int, [_P]),
    "symcoll_comm_abort": (_c.c_int, [_P]),
    "symcoll_comm_check": (_c.c_int, [_P]),
    "symcoll_comm_barrier": (_c.c_int, [_P]),
    "symcoll_comm_rank": (_c.c_int, [_P]),
    "symcoll_comm_nranks": (_c.c_int, [_P]),
    "symcoll_comm_device": (_c.c_int, [_P]),
    "symcoll_mem_alloc": (_c.c_int, [_P, _c.c_size_t, _c.POINTER(_P)]),
    "symcoll_mem_free": (_c.c_int, [_P]),
    "symcoll_mem_ptr": (_P, [_P, _c.c_int]),
    "symcoll_mem_device_view": (_c.c_int, [_P, _c.POINTER(DeviceView)]),
    "symcoll_mem_lookup": (_P, [_P, _P, _c.c_size_t, _c.POINTER(_c.c_size_t)]),
    "symcoll_pool_attach": (_c.c_int, [_P]),
    "symcoll_pool_detach": (_c.c_int, [_P]),
    "symcoll_all_reduce_ex": (_c.c_int, [_P, _P, _P, _c.c_size_t, _c.c_int, _c.c_int, _P, _c.POINTER(CollOpts)]),
    "symcoll_all_gather_ex": (_c.c_int, [_P, _P, _P, _c.c_size_t, _c.c_int, _P, _c.POINTER(CollOpts)]),
    "symcoll_reduce_scatter_ex": (_c.c_int, [_P, _P, _P, _c.c_size_t, _c.c_int, _c.c_int, _P, _c.POINTER(CollOpts)]),
    "symcoll_broadcast_ex": (_c.c_int, [_P, _P, _P, _c.c_size_t, _c.c_int, _c.c_int, _P, _c.POINTER(CollOpts)]),
    "symcoll_reduce_ex": (_c.c_int, [_P, _P, _P, _c.c_size_t, _c.c_int, _c.c_int, _c.c_int, _P,
                                     _c.POINTER(CollOpts)]),
    "symcoll_all_to_all_ex": (_c.c_int, [_P, _P, _P, _c.c_size_t, _c.c_int, _P, _c.POINTER(CollOpts)]),
    "symcoll_matmul_opts_init": (None, [_c.POINTER(MatmulOpts)]),
    "symcoll_all_gather_matmul": (_c.c_int, [_P, _P, _P, _P, _c.c_size_t, _c.c_size_t, _c.c_size_t, _c.c_int,
                                             _c.POINTER(MatmulOpts), _P]),
    "symcoll_matmul_reduce_scatter": (_c.c_int, [_P, _P, _P, _P, _c.c_size_t, _c.c_size_t, _c.c_size_t, _c.c_int,
                                                 _c.POINTER(MatmulOpts), _P]),
    "symcoll_norm_opts_init": (None, [_c.POINTER(NormOpts)]),
    "symcoll_all_reduce_rmsnorm": (_c.c_int, [_P, _P, _P, _P, _c.c_float, _P, _P, _c.c_size_t, _c.c_size_t, _c.c_int,
                                              _c.POINTER(NormOpts), _P]),
    "symcoll_reduce_scatter_rmsnorm": (_c.c_int, [_P, _P, _P, _P, _c.c_float, _P, _P, _c.c_size_t, _c.c_size_t,
                                                  _c.c_int, _c.POINTER(NormOpts), _P]),
    "symcoll_coll_algo": (_c.c_int, [_P, _c.c_int, _c.c_size_t, _c.c_int, _c.POINTER(_c.c_int)]),
    "symcoll_dtype_name": (_c.c_char_p, [_c.c_int]),
    "symcoll_op_name": (_c.c_char_p, [_c.c_int]),
    "symcoll_coll_name": (_c.c_char_p, [_c.c_int]),
    "symcoll_algo_name": (_c.c_char_p, [_c.c_int]),
    "symcoll_engine_name": (_c.c_char_p, [_c.c_int]),
}
for _name, (_res, _args) in _SIG.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def _names(fn):
    """The names the library gives values 0, 1, ... of one of its enums, up to the first unknown."""
    out = []
    while (name := fn(len(out)).decode()) != "unknown":
        out.append(name)
    return out


DTYPES = _names(lib.symcoll_dtype_name)
OPS = {name: i for i, name in enumerate(_names(lib.symcoll_op_name))}
COLLS = {name: i for i, name in enumerate(_names(lib.symcoll_coll_name))}
ALGOS = _names(lib.symcoll_algo_name)
ENGINES = {name: i for i, name in enumerate(_names(lib.symcoll_engine_name))}  # symcoll_engine_t
