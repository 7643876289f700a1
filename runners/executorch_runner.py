#!/usr/bin/env python3
"""ptecheck runner for the ExecuTorch pip package (protocol version 1).

Speaks docs/runner-protocol.md: writes one hello line, then answers JSON Lines
requests from stdin with one reply line each on stdout, in order. Diagnostics go
to stderr only.

Wraps the portable_lib pybindings of the `executorch` wheel (tested with 1.5.1):
programs are loaded with `_load_program(path, data_path=..., program_verification=
Verification.InternalConsistency)` and cached by (pte, ptd) path; every request
loads a fresh method (`ExecuTorchProgram.load_method`), sets its inputs, executes
it and reads its outputs (cloned, so they outlive the method).

Needs Python >= 3.10 with `executorch` and `torch` (which brings numpy), and
protocol_json.py beside it (how a line is read as JSON); standard library otherwise.
Run:  VENV/bin/python runners/executorch_runner.py
"""

import os
import sys

# --- Keep the protocol stream clean --------------------------------------------------------
# Native code (the ExecuTorch runtime, XNNPACK, torch) and Python libraries may write to file
# descriptor 1. Move the real stdout to a private descriptor before importing anything heavy
# and point fd 1 (and sys.stdout) at stderr, so that only this script writes protocol lines.
_PROTO_FD = os.dup(1)
os.dup2(2, 1)
sys.stdout = sys.stderr
_OUT = os.fdopen(_PROTO_FD, "w", encoding="utf-8", newline="\n")

import collections  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import protocol_json  # noqa: E402  (beside this script: its folder is on sys.path)

PROTOCOL = 1
RUNNER_NAME = "executorch-pybindings"
PROGRAM_CACHE_SIZE = int(os.environ.get("PTECHECK_ET_PROGRAM_CACHE", "8"))
METHODS_PER_PROGRAM = int(os.environ.get("PTECHECK_ET_METHODS_PER_PROGRAM", "64"))

# Backends the pybindings register but whose init cannot succeed on a stock machine:
# QnnBackend reports `_is_available() == True` yet its init dlopens the Qualcomm QNN SDK
# (libQnnHtp.so etc.), which the wheel does not ship. `_is_available()` already rules out
# OpenvinoBackend when libopenvino_c.so is missing. Override the whole list with
# PTECHECK_ET_BACKENDS=name1,name2 (empty string = no backends).
_UNUSABLE_BACKENDS = {"QnnBackend"}

# executorch/runtime/core/error.h (1.5.1)
ERROR_NAMES = {
    0x00: "Ok",
    0x01: "Internal",
    0x02: "InvalidState",
    0x03: "EndOfMethod",
    0x04: "AlreadyLoaded",
    0x10: "NotSupported",
    0x11: "NotImplemented",
    0x12: "InvalidArgument",
    0x13: "InvalidType",
    0x14: "OperatorMissing",
    0x15: "RegistrationExceedingMaxKernels",
    0x16: "RegistrationAlreadyRegistered",
    0x20: "NotFound",
    0x21: "MemoryAllocationFailed",
    0x22: "AccessFailed",
    0x23: "InvalidProgram",
    0x24: "InvalidExternalData",
    0x25: "OutOfResources",
    0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed",
    0x32: "DelegateInvalidHandle",
}

# The pybindings raise RuntimeError with messages ending in the code, printed with %x:
#   "Failed to load program, error: 0x:23"
#   "Failed to load method forward, error: 0x:20"
#   "method->set_inputs() for method 'forward' failed with error 0x12"
#   "method->execute() failed with error 0x12"
_CODE_RE = re.compile(r"0x:?([0-9a-fA-F]+)\s*$")

INT_RANGES = {
    "int64": (-(1 << 63), (1 << 63) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int8": (-(1 << 7), (1 << 7) - 1),
    "uint8": (0, 255),
}
FLOAT_DTYPES = ("float32", "float64")
_NONFINITE_IN = {"NaN": float("nan"), "nan": float("nan"), "inf": float("inf"),
                 "Infinity": float("inf"), "-inf": float("-inf"), "-Infinity": float("-inf")}
_INF = float("inf")


class RequestError(Exception):
    """The request itself is malformed (reply stage "request")."""


def log(msg):
    try:
        sys.stderr.write("executorch_runner: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


def write_line(obj):
    _OUT.write(json.dumps(obj, separators=(",", ":"), allow_nan=False))
    _OUT.write("\n")
    _OUT.flush()


# --- Imports of the wrapped runtime (once) --------------------------------------------------
warnings.filterwarnings("ignore", message=".*experimental.*")
try:
    import torch  # noqa: E402  (must precede the pybindings: it loads libtorch)
    from executorch.extension.pybindings import portable_lib as _et  # noqa: E402
except BaseException as e:  # noqa: BLE001
    log("cannot import executorch/torch: %s: %s" % (type(e).__name__, e))
    sys.exit(1)

_VERIFICATION = _et.Verification.InternalConsistency

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def executorch_version():
    try:
        from importlib.metadata import version
        return version("executorch")
    except Exception:  # noqa: BLE001
        return getattr(sys.modules.get("executorch"), "__version__", None) or "unknown"


def normalise_operator(name):
    """`aten::add.out` stays; `aten::copy_` (default overload) becomes `aten::copy_.default`."""
    ns, sep, rest = name.rpartition("::")
    if "." in rest:
        return name
    return name + ".default"


def hello():
    ops = sorted({normalise_operator(n) for n in _et._get_operator_names()})
    override = os.environ.get("PTECHECK_ET_BACKENDS")
    if override is not None:
        backends = [b for b in (s.strip() for s in override.split(",")) if b]
    else:
        backends = []
        for b in _et._get_registered_backend_names():
            if b in _UNUSABLE_BACKENDS:
                log("not advertising registered backend %s (its init needs an SDK the wheel lacks)" % b)
                continue
            try:
                ok = _et._is_available(b)
            except Exception:  # noqa: BLE001
                ok = False
            if ok:
                backends.append(b)
            else:
                log("not advertising registered backend %s (_is_available() is false)" % b)
    return {"hello": {"protocol": PROTOCOL, "name": RUNNER_NAME, "version": executorch_version(),
                      "backends": backends, "operators": ops}}


# --- Values (corpus encoding) ---------------------------------------------------------------
def _req(cond, msg):
    if not cond:
        raise RequestError(msg)


def _float_in(v, where):
    c = v.__class__
    if c is float:
        return v
    if c is int:
        return float(v)
    if c is str:
        f = _NONFINITE_IN.get(v)
        if f is not None:
            return f
    raise RequestError("%s: not a float: %r" % (where, v))


def decode_value(v, i):
    where = "inputs[%d]" % i
    _req(isinstance(v, dict), "%s: not an object" % where)
    kind = v.get("kind")
    if kind == "tensor":
        dtype = v.get("dtype")
        tdtype = DTYPES.get(dtype)
        _req(tdtype is not None, "%s: unsupported dtype %r" % (where, dtype))
        shape = v.get("shape")
        _req(isinstance(shape, list), "%s: shape is not a list" % where)
        numel = 1
        for d in shape:
            _req(d.__class__ is int and d >= 0, "%s: bad shape %r" % (where, shape))
            numel *= d
        values = v.get("values")
        _req(isinstance(values, list), "%s: values is not a list" % where)
        _req(len(values) == numel,
             "%s: %d values for shape %r (%d elements)" % (where, len(values), shape, numel))
        if dtype in FLOAT_DTYPES:
            if not all(x.__class__ is float for x in values):
                values = [_float_in(x, where) for x in values]
        elif dtype == "bool":
            for x in values:
                _req(x is True or x is False or (x.__class__ is int and (x == 0 or x == 1)),
                     "%s: not a bool: %r" % (where, x))
        else:
            for x in values:
                _req(x.__class__ is int, "%s: not an integer: %r" % (where, x))
            if values:
                lo, hi = INT_RANGES[dtype]
                _req(lo <= min(values) and max(values) <= hi,
                     "%s: value out of range for %s" % (where, dtype))
        t = torch.tensor(values, dtype=tdtype).reshape(shape)
        if dtype == "float32" and values:
            # A finite value float32 cannot hold is refused, not read as inf (as ptecheck's
            # reader refuses it).
            over = torch.isinf(t.reshape(-1)) & torch.isfinite(torch.tensor(values, dtype=torch.float64))
            if bool(over.any()):
                k = int(over.nonzero()[0])
                raise RequestError("%s: values[%d] = %r is outside float32" % (where, k, values[k]))
        _digest_holds(v.get("bytes_sha256"), t, where)
        return t
    if kind == "int":
        x = v.get("value")
        _req(x.__class__ is int and INT_RANGES["int64"][0] <= x <= INT_RANGES["int64"][1],
             "%s: bad int value %r" % (where, x))
        return x
    if kind == "float":
        return _float_in(v.get("value"), where)
    if kind == "bool":
        x = v.get("value")
        _req(x is True or x is False or (x.__class__ is int and (x == 0 or x == 1)),
             "%s: bad bool value %r" % (where, x))
        return bool(x)
    if kind == "none":
        return None
    raise RequestError("%s: unknown kind %r" % (where, kind))


def _digest_holds(recorded, t, where):
    """A tensor recording bytes_sha256 must encode to those bytes (a float tensor holding a NaN
    is exempt: every NaN is written "NaN", whatever bits it had)."""
    if recorded is None:
        return
    _req(isinstance(recorded, str), "%s: bytes_sha256 is not a string" % where)
    _req(len(recorded) == 64 and all(c in "0123456789abcdef" for c in recorded),
         "%s: bytes_sha256 is not a SHA-256 digest (64 lowercase hex digits)" % where)
    flat = t.reshape(-1).contiguous()
    # The bytes themselves, not a Python int per byte (a 4M-element float32 input is 16 MB).
    computed = hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()
    if computed != recorded and not (t.is_floating_point() and bool(torch.isnan(flat).any())):
        raise RequestError("%s: bytes_sha256 %s is not the SHA-256 of its values' bytes (%s)"
                           % (where, recorded, computed))


def _float_out(x):
    if x != x:
        return "NaN"
    return "inf" if x > 0 else "-inf"


def encode_value(o, i):
    if isinstance(o, torch.Tensor):
        dtype = DTYPE_NAMES.get(o.dtype)
        if dtype is None:
            raise ValueError("outputs[%d]: dtype %s is not in the corpus encoding" % (i, o.dtype))
        vals = o.reshape(-1).tolist()
        if dtype in FLOAT_DTYPES:
            # float32 -> Python float is exact; repr of a float round-trips and keeps -0.0.
            vals = [x if -_INF < x < _INF else _float_out(x) for x in vals]
        return {"kind": "tensor", "dtype": dtype, "shape": list(o.shape), "values": vals}
    if o is None:
        return {"kind": "none"}
    if o is True or o is False:
        return {"kind": "bool", "value": o}
    if isinstance(o, int):
        return {"kind": "int", "value": int(o)}
    if isinstance(o, float):
        return {"kind": "float", "value": o if -_INF < o < _INF else _float_out(o)}
    raise ValueError("outputs[%d]: unsupported output type %s" % (i, type(o).__name__))


# --- Running ----------------------------------------------------------------------------------
def error_reply(rid, stage, exc):
    msg = str(exc)
    reply = {"id": rid, "stage": stage}
    m = _CODE_RE.search(msg)
    if m and isinstance(exc, RuntimeError):
        code = int(m.group(1), 16)
        reply["error"] = "%s failed: %s (0x%02x): %s" % (
            stage, ERROR_NAMES.get(code, "Unknown"), code, msg)
        reply["code"] = code
    else:
        reply["error"] = "%s failed: %s: %s" % (stage, type(exc).__name__, msg)
    return reply


class ProgramCache:
    """Small LRU of loaded ExecuTorchProgram objects keyed by (pte, ptd).

    An ExecuTorchProgram keeps memory for every method loaded from it until the program
    itself is destroyed (about 1.5 kB per `load_method` for a tiny program in 1.5.1), so an
    entry is retired after `max_methods` method loads; the next request reloads the file
    (about 45 us for a small program).
    """

    def __init__(self, size, max_methods):
        self.size = max(1, size)
        self.max_methods = max(1, max_methods)
        self.items = collections.OrderedDict()  # key -> [program, method loads]

    def get(self, pte, ptd):
        key = (pte, ptd)
        entry = self.items.get(key)
        if entry is not None:
            entry[1] += 1
            if entry[1] >= self.max_methods:
                del self.items[key]  # this request still uses it; the next one reloads
            else:
                self.items.move_to_end(key)
            return entry[0]
        prog = _et._load_program(pte, program_verification=_VERIFICATION, data_path=ptd)
        self.items[key] = [prog, 1]
        while len(self.items) > self.size:
            # The caller holds its own reference for the whole request, so an evicted
            # program stays alive until that request's method is gone.
            self.items.popitem(last=False)
        return prog


def run(cache, rid, req):
    pte = req.get("pte")
    method_name = req.get("method")
    raw_inputs = req.get("inputs")
    ptd = req.get("ptd")
    try:
        _req(isinstance(pte, str) and pte, "pte must be a non-empty string")
        _req(isinstance(method_name, str), "method must be a string")
        _req(isinstance(raw_inputs, list), "inputs must be a list")
        _req(ptd is None or isinstance(ptd, str), "ptd must be a string or null")
        for what, s in (("pte", pte), ("method", method_name), ("ptd", ptd or "")):
            try:
                s.encode("utf-8")
            except UnicodeError:
                raise RequestError("%s is not valid Unicode" % what) from None
        args = [decode_value(v, i) for i, v in enumerate(raw_inputs)]
    except RequestError as e:
        return {"id": rid, "error": "request failed: %s" % e, "stage": "request"}
    except Exception as e:  # noqa: BLE001
        return error_reply(rid, "request", e)

    try:
        program = cache.get(pte, ptd)
    except Exception as e:  # noqa: BLE001
        return error_reply(rid, "load_program", e)
    # `program` (a local) keeps the C++ Program alive while `method` exists.
    method = None
    try:
        try:
            method = program.load_method(method_name)
        except Exception as e:  # noqa: BLE001
            return error_reply(rid, "load_method", e)
        try:
            method.set_inputs(args)
        except Exception as e:  # noqa: BLE001
            return error_reply(rid, "set_inputs", e)
        try:
            method.execute()
        except Exception as e:  # noqa: BLE001
            return error_reply(rid, "execute", e)
        try:
            outs = method.get_outputs(True)  # clone: outputs must outlive the method
            outputs = [encode_value(o, i) for i, o in enumerate(outs)]
        except Exception as e:  # noqa: BLE001
            return error_reply(rid, "read_outputs", e)
        return {"id": rid, "outputs": outputs}
    finally:
        method = None  # release the method before the program can go
        del args
        program = None


def handle_line(cache, line):
    try:
        req = protocol_json.loads(line)
    except Exception as e:  # noqa: BLE001
        return {"id": None, "error": "request failed: not JSON: %s" % e, "stage": "request"}
    if not isinstance(req, dict):
        return {"id": None, "error": "request failed: not a JSON object", "stage": "request"}
    rid = req.get("id")
    if rid.__class__ is not int or rid < 0:
        return {"id": None, "error": "request failed: bad or missing id %r" % (rid,),
                "stage": "request"}
    op = req.get("op")
    if op is not None and op != "run":
        return {"id": rid, "error": "request failed: unsupported op %r" % (op,), "stage": "request"}
    return run(cache, rid, req)


def main():
    try:
        h = hello()
    except Exception as e:  # noqa: BLE001
        log("cannot build the hello: %s: %s" % (type(e).__name__, e))
        return 1
    try:
        write_line(h)
    except BrokenPipeError:
        return 0
    cache = ProgramCache(PROGRAM_CACHE_SIZE, METHODS_PER_PROGRAM)
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            reply = handle_line(cache, line)
        except Exception as e:  # noqa: BLE001  (last resort: never die on input)
            reply = {"id": None, "error": "request failed: internal: %s: %s" % (type(e).__name__, e),
                     "stage": "request"}
        try:
            write_line(reply)
        except BrokenPipeError:
            return 0
        except ValueError as e:  # a value json cannot write; should not happen
            write_line({"id": reply.get("id"), "error": "read_outputs failed: %s" % e,
                        "stage": "read_outputs"})
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except KeyboardInterrupt:
        rc = 130
    try:
        _OUT.flush()
    except Exception:  # noqa: BLE001
        pass
    sys.exit(rc)
