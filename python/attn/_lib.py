"""libattn.so through ctypes: finding it, the prototypes of its flat API
(include/attn/handles.h), and turning its statuses into attn.Error.

ctypes rather than cffi: it is part of Python (nothing to install, nothing
compiled, the same file for every Python 3), and the flat API passes only
numbers, strings, arrays and opaque pointers (no struct but attn_error), so a
C parser would buy nothing. The library is looked for, in order, at
$ATTN_LIBRARY, where `make install` put it (_installed.py, a path relative to
this package), in the build tree (../../build/libattn.so from here), then by
the dynamic loader's own search."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_MSG_MAX = 512  # ATTN_ERROR_MSG_MAX (attn/status.h)


class Error(RuntimeError):
    """A failure: the library's message (status: its short name, such as
    "shape" or "invalid argument"), or a bad input caught before the call."""

    def __init__(self, message, status="invalid argument"):
        super().__init__(message)
        self.status = status


Error.__module__ = "attn"


def _candidates():
    env = os.environ.get("ATTN_LIBRARY")
    if env:
        return [env]
    found = []
    try:
        from . import _installed  # written by `make install`
        found.append(os.path.normpath(os.path.join(_HERE, _installed.LIBRARY)))
    except ImportError:
        pass
    found.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libattn.so")))
    found.append("libattn.so.0")
    return found


def _short_spin():
    """GOMP_SPINCOUNT=1000 unless the user chose a wait policy: OpenMP threads
    that spin long collapse on a busy machine (the attn program sets the same).
    libgomp reads it once, when it is loaded: it takes effect when attn is
    imported before anything else that uses OpenMP (torch does)."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "1000"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("attn: cannot load libattn.so; tried " + "; ".join(tried) +
                      ". Build it with `make`, install it with `make install`, "
                      "or name it in ATTN_LIBRARY")


def _check_blas_kernels(lib):
    """libattn-ompwait.so names OpenBLAS's kernels for an Intel CPU before
    OpenBLAS starts (docs/engines.md). When numpy started OpenBLAS first, it
    runs what it chose itself, which on a CPU newer than its table is the
    generic SSE3 one: 4x slower there, and the last bits differ from the attn
    program's. Say so; nothing can restart it."""
    try:
        corename = lib.openblas_get_corename
        libc_getenv = ctypes.CDLL(None).getenv
    except AttributeError:  # not OpenBLAS, or not a dynamic-arch one
        return
    corename.restype = libc_getenv.restype = ctypes.c_char_p
    libc_getenv.argtypes = [ctypes.c_char_p]
    want, got = libc_getenv(b"OPENBLAS_CORETYPE"), corename()
    if want and got and want.decode().lower() != got.decode().lower():
        import warnings
        warnings.warn(f"attn: OpenBLAS was started (by numpy?) before attn and runs its "
                      f"{got.decode()} kernels, not {want.decode()}: import attn before numpy, "
                      f"or set OPENBLAS_CORETYPE={want.decode()} before starting Python",
                      RuntimeWarning, stacklevel=3)


_short_spin()
lib, library_path = _load()
_check_blas_kernels(lib)

c_int, c_double, c_float, c_size_t = ctypes.c_int, ctypes.c_double, ctypes.c_float, ctypes.c_size_t
c_int64, c_uint64, c_char_p, c_void_p = ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_void_p
P = ctypes.POINTER


class ErrorStruct(ctypes.Structure):
    _fields_ = [("code", c_int), ("msg", ctypes.c_char * _MSG_MAX)]


Err = P(ErrorStruct)
TRAIN_CALLBACK = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_int64, c_int64, c_double, c_double,
                                  c_double)

# name: (restype, argtypes); pointers to arrays are passed as c_void_p.
_PROTOS = {
    "attn_version": (c_char_p, []),
    "attn_status_str": (c_char_p, [c_int]),
    "attn_h_free": (None, [c_void_p]),
    "attn_h_rng_create": (c_void_p, [c_uint64]),
    "attn_h_rng_free": (None, [c_void_p]),
    "attn_h_param_count": (c_int, [c_void_p]),
    "attn_h_param_name": (c_char_p, [c_void_p, c_int]),
    "attn_h_param_data": (c_void_p, [c_void_p, c_int]),
    "attn_h_param_grad": (c_void_p, [c_void_p, c_int]),
    "attn_h_param_shape": (c_int, [c_void_p, c_int, P(c_int64)]),
    "attn_h_module_create": (c_int, [c_char_p, c_int, c_int, c_int, c_int, c_double, c_int,
                                     c_void_p, P(c_void_p), Err]),
    "attn_module_free": (None, [c_void_p]),
    "attn_module_params": (c_void_p, [c_void_p]),
    "attn_module_out_dim": (c_int, [c_void_p]),
    "attn_h_module_forward": (c_int, [c_void_p, c_void_p, c_int, c_int, c_void_p, c_int, c_void_p,
                                      c_int, c_void_p, c_size_t, Err]),
    "attn_h_module_mask_numel": (c_size_t, [c_void_p, c_int, c_int]),
    "attn_h_module_backward": (c_int, [c_void_p, c_void_p, c_int, c_int, c_void_p, c_void_p,
                                       Err]),
    "attn_h_sdpa_forward": (c_int, [c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_void_p,
                                    c_float, c_double, c_void_p, c_int, c_int, c_void_p, c_void_p,
                                    Err]),
    "attn_h_sdpa_backward": (c_int, [c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_void_p,
                                     c_void_p, c_void_p, c_float, c_double, c_void_p, c_int, c_int,
                                     c_void_p, c_void_p, c_void_p, c_void_p, Err]),
    "attn_h_gpt_load": (c_int, [c_char_p, P(c_void_p), Err]),
    "attn_h_gpt_free": (None, [c_void_p]),
    "attn_h_gpt_info_json": (c_void_p, [c_void_p]),
    "attn_h_gpt_params": (c_void_p, [c_void_p]),
    "attn_h_gpt_forward": (c_int, [c_void_p, c_void_p, c_void_p, c_int, c_int, c_void_p,
                                   P(c_float), Err]),
    "attn_h_gpt_attention": (c_int, [c_void_p, c_void_p, c_int, c_void_p, Err]),
    "attn_h_generator_create": (c_int, [c_void_p, c_double, c_int, c_double, c_uint64,
                                        c_char_p, c_int, P(c_void_p), Err]),
    "attn_generator_prompt": (c_int, [c_void_p, c_char_p, c_size_t, Err]),
    "attn_generator_next": (c_int, [c_void_p, P(ctypes.c_int32), ctypes.c_char_p, P(c_int), Err]),
    "attn_h_generator_stopped": (c_int, [c_void_p]),
    "attn_h_generator_free": (None, [c_void_p]),
    "attn_h_viz_html": (c_int, [c_void_p, c_char_p, c_size_t, c_int, c_double, c_int, c_uint64,
                                c_char_p, P(c_void_p), P(c_size_t), Err]),
    "attn_h_train": (c_int, [c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_int,
                             c_int, TRAIN_CALLBACK, c_void_p, P(c_int64), P(c_int), c_char_p,
                             P(c_int), Err]),
    "attn_precision_check": (c_int, [c_int, Err]),
    "attn_h_set_threads": (None, [c_int, c_int]),
    "attn_h_get_threads": (c_int, []),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def error():
    """A fresh error record for one call."""
    return ErrorStruct()


def check(status, err):
    """Raise attn.Error with the library's message when status is not ATTN_OK."""
    if status != 0:
        msg = err.msg.decode("utf-8", "replace") or "attn: failed"
        raise Error(msg, lib.attn_status_str(status).decode())


def call(fn, *args):
    """fn(*args, &err), raising attn.Error on failure."""
    err = ErrorStruct()
    check(fn(*args, ctypes.byref(err)), err)


def take_string(ptr):
    """A malloc'd C string as str, freed."""
    if not ptr:
        raise Error("out of memory", "out of memory")
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib.attn_h_free(ptr)


def text(s):
    """str -> UTF-8 bytes (None stays None)."""
    return None if s is None else s.encode("utf-8")


def path(p):
    """A path (str or os.PathLike) -> bytes (None stays None)."""
    return None if p is None else os.fsencode(os.fspath(p))


class Param:
    """One parameter of a C parameter list: its state_dict name, shape and the
    addresses of its data and gradient (owned by the C object)."""
    __slots__ = ("name", "shape", "data", "grad", "numel")

    def __init__(self, plist, i):
        dims = (c_int64 * 4)()
        nd = lib.attn_h_param_shape(plist, i, dims)
        self.name = lib.attn_h_param_name(plist, i).decode()
        self.shape = tuple(int(dims[d]) for d in range(nd))
        self.data = lib.attn_h_param_data(plist, i)
        self.grad = lib.attn_h_param_grad(plist, i)
        n = 1
        for d in self.shape:
            n *= d
        self.numel = n


def params(plist):
    """The parameters of a C parameter list, in state_dict order."""
    return [Param(plist, i) for i in range(lib.attn_h_param_count(plist))]
