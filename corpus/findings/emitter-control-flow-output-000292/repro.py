#!/usr/bin/env python3
# Reproducer written by ptecheck runners/executorch_exporter.py --script program.json.
# Needs only torch and executorch (tested: executorch 1.5.1, torch 2.14.1).
# Run: python THIS.py [OUT.pte]  (prints what ExecuTorch emitted; writes the .pte when
# given a path).
# The builder below is runners/exir_build.py, verbatim.
"""Rebuilds a ptecheck saved program (src/ir/saved.rs, schema (5, x)) as torch modules and
runs it through ExecuTorch's own pipeline: torch.export -> to_edge -> to_backend (one lowered
module per IR module) -> to_executorch -> serialised bytes.

This file is the one copy of the builder. runners/executorch_exporter.py imports it, and its
`--script` mode pastes this file's source, unchanged, into a standalone reproducer, so it must
import nothing but the standard library, torch and executorch (no ptecheck, no protocol_json).

What it builds:
* one `IRGraph` (a torch.nn.Module) per graph: a method body, a lowered module's graph, a cond
  branch, a loop body. Constants become buffers; `forward(*inputs)` walks the nodes, refs being
  constants, then inputs, then node outputs in order; it returns a tuple of the outputs.
* export mode: cond -> torch.cond, map -> torch._higher_order_ops.map.map, scan ->
  torch._higher_order_ops.scan.scan, while -> torch._higher_order_ops.while_loop, and each call
  site calls the module's LoweredBackendModule under `torch.fx.traceback.annotate(
  {"ptecheck_site": N})` (N = the site's pre-order index in its method, as src/ir/eval.rs counts
  them), which is how a DelegateCall is matched back to its IR call site after emission.
* eager mode: the same graphs with Python control flow (what the higher-order ops compute) and
  every call replaced by the plain torch graph of its module: the un-lowered program.

Backends: `XnnpackBackend` (ExecuTorch's XNNPACK preprocess), `BackendWithCompilerDemo`
(executorch/exir/backend/test/backend_with_compiler_demo.py) and ptecheck's `demo` and `argkeep`,
registered here as BackendDetails subclasses of those exact names (to_backend finds a backend by
class name among BackendDetails.__subclasses__()) whose preprocess returns the module's
`processed` bytes from the saved program. `scratch` and `multifn` get the same pass-through
(with the program's named data for multifn) only when PTECHECK_EXIR_EXTRA_BACKENDS=1.
"""

import base64
import copy
import functools
import hashlib
import math
import os
import time
import traceback

import torch
import torch.fx.traceback as _fx_traceback
from torch._higher_order_ops.map import map as _hop_map
from torch._higher_order_ops.scan import scan as _hop_scan
from torch._higher_order_ops.while_loop import while_loop as _hop_while_loop

from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
from executorch.exir.backend.backend_api import to_backend
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir._serialize._named_data_store import NamedDataStore

SITE_KEY = "ptecheck_site"
SITE_ATTR = "ptecheck_site"
SCHEMA_MAJOR = 5
# Largest tensor the builder makes up itself (example inputs of a lowered module): more is a
# build error, not an allocation that takes the machine down.
MAX_MADE_UP_ELEMENTS = 1 << 24

IR_DTYPES = {"f32": torch.float32, "i64": torch.int64, "bool": torch.bool}
CORPUS_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
CORPUS_NAMES = {v: k for k, v in CORPUS_DTYPES.items()}
INT_RANGES = {
    "int64": (-(1 << 63), (1 << 63) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int8": (-(1 << 7), (1 << 7) - 1),
    "uint8": (0, 255),
}
_NONFINITE_IN = {"NaN": float("nan"), "nan": float("nan"), "inf": float("inf"),
                 "Infinity": float("inf"), "-inf": float("-inf"), "-Infinity": float("-inf")}
_INF = float("inf")


# --- Errors -----------------------------------------------------------------------------------
class ProgramError(Exception):
    """The saved program is not one (wrong shape): a `request` error."""


class BuildError(Exception):
    """The saved program is one, but cannot be rebuilt as torch modules: a `build` error."""


class StageError(Exception):
    """A stage of the pipeline failed; `stage` is one of build/export/lower/emit/eager."""

    def __init__(self, stage, exc, detail=None):
        self.stage = stage
        self.exc = exc
        self.detail = detail
        super().__init__("%s: %s" % (stage, describe_exception(exc)))


def describe_exception(exc, limit=1500):
    """`Type: message`, the message cut to `limit` characters (torch's run to pages)."""
    msg = str(exc).strip()
    if len(msg) > limit:
        msg = msg[:limit] + "... [%d more characters]" % (len(msg) - limit)
    return "%s: %s" % (type(exc).__name__, msg)


# --- Reading a saved program ------------------------------------------------------------------
def _need(cond, where, msg):
    if not cond:
        raise ProgramError("%s: %s" % (where, msg))


def _is_int(v):
    return v.__class__ is int


def _check_vtype(t, where):
    if isinstance(t, str):
        _need(t in ("int", "bool", "double"), where, "unknown value type %r" % (t,))
        return
    _need(isinstance(t, dict) and list(t) == ["tensor"], where, "not a value type")
    d = t["tensor"]
    _need(isinstance(d, dict), where, "tensor type is not an object")
    _need(d.get("dtype") in IR_DTYPES, where, "unknown dtype %r" % (d.get("dtype"),))
    shape = d.get("shape")
    _need(isinstance(shape, list) and all(_is_int(s) and s >= 0 for s in shape), where,
          "bad shape %r" % (shape,))
    _need(isinstance(d.get("dynamic", False), bool), where, "dynamic is not a bool")


def _check_refs(rs, where):
    _need(isinstance(rs, list) and all(_is_int(r) and r >= 0 for r in rs), where,
          "refs must be a list of non-negative integers")


def _check_graph(g, where, depth=0):
    _need(depth < 64, where, "graphs nested too deep")
    _need(isinstance(g, dict), where, "graph is not an object")
    consts = g.get("constants", [])
    _need(isinstance(consts, list), where + ".constants", "not a list")
    for i, c in enumerate(consts):
        w = "%s.constants[%d]" % (where, i)
        _need(isinstance(c, dict), w, "not an object")
        _need(c.get("dtype") in IR_DTYPES, w, "unknown dtype %r" % (c.get("dtype"),))
        shape = c.get("shape")
        _need(isinstance(shape, list) and all(_is_int(s) and s >= 0 for s in shape), w,
              "bad shape")
        vals = c.get("values")
        _need(isinstance(vals, list), w, "values is not a list")
        _need(len(vals) == math.prod(shape), w,
              "%d values for shape %r" % (len(vals), shape))
        _need(all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                  for v in vals), w, "values must be numbers")
    _need(isinstance(g.get("inputs"), list), where + ".inputs", "not a list")
    for i, t in enumerate(g["inputs"]):
        _check_vtype(t, "%s.inputs[%d]" % (where, i))
    _need(isinstance(g.get("nodes"), list), where + ".nodes", "not a list")
    _check_refs(g.get("outputs"), where + ".outputs")
    for i, n in enumerate(g["nodes"]):
        w = "%s.nodes[%d]" % (where, i)
        _need(isinstance(n, dict), w, "not an object")
        kind = n.get("node")
        if kind == "op":
            _need(isinstance(n.get("op"), dict) and isinstance(n["op"].get("op"), str), w + ".op",
                  "not an op")
            _check_refs(n.get("args"), w + ".args")
        elif kind == "call":
            _need(_is_int(n.get("module")) and n["module"] >= 0, w + ".module",
                  "not a module index")
            _check_refs(n.get("args"), w + ".args")
        elif kind == "cond":
            _need(_is_int(n.get("pred")) and n["pred"] >= 0, w + ".pred", "not a ref")
            _check_refs(n.get("operands"), w + ".operands")
            _check_graph(n.get("then_graph"), w + ".then_graph", depth + 1)
            _check_graph(n.get("else_graph"), w + ".else_graph", depth + 1)
        elif kind == "map":
            _need(_is_int(n.get("xs")) and n["xs"] >= 0, w + ".xs", "not a ref")
            _check_refs(n.get("args"), w + ".args")
            _check_graph(n.get("body"), w + ".body", depth + 1)
        elif kind == "scan":
            _check_refs(n.get("init"), w + ".init")
            _check_refs(n.get("xs"), w + ".xs")
            _check_graph(n.get("body"), w + ".body", depth + 1)
        elif kind == "while":
            _check_refs(n.get("carried"), w + ".carried")
            _need(_is_int(n.get("max_iterations")) and n["max_iterations"] >= 0,
                  w + ".max_iterations", "not a non-negative integer")
            _check_graph(n.get("cond"), w + ".cond", depth + 1)
            _check_graph(n.get("body"), w + ".body", depth + 1)
        else:
            raise ProgramError("%s: unknown node kind %r" % (w, kind))


def _hex(s, where):
    _need(isinstance(s, str) and not s.startswith("0x"), where, "not a hex string")
    try:
        return bytes.fromhex(s)
    except ValueError as e:
        raise ProgramError("%s: %s" % (where, e)) from None


def read_program(doc):
    """The `program` object of a saved-program document, checked for shape (ProgramError)."""
    _need(isinstance(doc, dict), "$", "not a JSON object")
    v = doc.get("schema_version")
    _need(isinstance(v, list) and len(v) == 2 and all(_is_int(x) for x in v),
          "$.schema_version", "must be [major, minor]")
    _need(v[0] == SCHEMA_MAJOR, "$.schema_version", "major version %d is not supported" % v[0])
    p = doc.get("program")
    _need(isinstance(p, dict), "$.program", "not an object")
    methods = p.get("methods")
    _need(isinstance(methods, list) and methods, "$.program.methods", "not a non-empty list")
    names = set()
    for i, m in enumerate(methods):
        w = "$.program.methods[%d]" % i
        _need(isinstance(m, dict) and isinstance(m.get("name"), str) and m["name"], w,
              "a method needs a name")
        _need(m["name"] not in names, w, "method %r given twice" % m["name"])
        names.add(m["name"])
        _check_graph(m.get("graph"), w + ".graph")
    modules = p.get("modules", [])
    _need(isinstance(modules, list), "$.program.modules", "not a list")
    for i, m in enumerate(modules):
        w = "$.program.modules[%d]" % i
        _need(isinstance(m, dict) and isinstance(m.get("backend"), str), w, "a module needs a backend")
        _check_graph(m.get("graph"), w + ".graph")
        _hex(m.get("processed"), w + ".processed")
        specs = m.get("compile_specs", [])
        _need(isinstance(specs, list), w + ".compile_specs", "not a list")
        for j, s in enumerate(specs):
            _need(isinstance(s, list) and len(s) == 2 and isinstance(s[0], str),
                  "%s.compile_specs[%d]" % (w, j), "not a [key, hex] pair")
            _hex(s[1], "%s.compile_specs[%d][1]" % (w, j))
    for i, b in enumerate(p.get("named_data", []) or []):
        w = "$.program.named_data[%d]" % i
        _need(isinstance(b, dict) and isinstance(b.get("key"), str), w, "a blob needs a key")
        _hex(b.get("data"), w + ".data")
    return p


def method_names(program):
    return [m["name"] for m in program["methods"]]


def module_bytes(module):
    return bytes.fromhex(module["processed"])


def module_specs(module):
    return [CompileSpec(k, bytes.fromhex(v)) for k, v in module.get("compile_specs", [])]


def _node_outputs(n, modules, where):
    kind = n["node"]
    if kind in ("op", "map"):
        return 1
    if kind == "call":
        if n["module"] >= len(modules):
            raise BuildError("%s: module %d does not exist (%d modules)" % (where, n["module"], len(modules)))
        return len(modules[n["module"]]["graph"]["outputs"])
    if kind == "cond":
        return len(n["then_graph"]["outputs"])
    if kind == "scan":
        return len(n["body"]["outputs"])
    return len(n["carried"])  # while


def call_sites(graph):
    """The Call nodes of a method graph in pre-order (as src/ir/eval.rs numbers call sites):
    a list of module indices, site i = element i."""
    out = []

    def walk(g):
        for n in g["nodes"]:
            if n["node"] == "call":
                out.append(n["module"])
            for key in ("then_graph", "else_graph", "cond", "body"):
                if key in n and n["node"] != "op":
                    walk(n[key])
    walk(graph)
    return out


# --- Values (the corpus encoding, docs/runner-protocol.md section 4) -----------------------
class ValueError_(Exception):
    """A value not in the corpus encoding (a `request` error)."""


def _vreq(cond, msg):
    if not cond:
        raise ValueError_(msg)


def _float_in(v, where):
    if v.__class__ is float:
        return v
    if v.__class__ is int:
        return float(v)
    if v.__class__ is str and v in _NONFINITE_IN:
        return _NONFINITE_IN[v]
    raise ValueError_("%s: not a float: %r" % (where, v))


def decode_value(v, where):
    """A corpus-encoded value as a torch tensor / int / float / bool / None."""
    _vreq(isinstance(v, dict), "%s: not an object" % where)
    kind = v.get("kind")
    if kind == "tensor":
        dtype = v.get("dtype")
        tdtype = CORPUS_DTYPES.get(dtype)
        _vreq(tdtype is not None, "%s: unsupported dtype %r" % (where, dtype))
        shape = v.get("shape")
        _vreq(isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape),
              "%s: bad shape %r" % (where, shape))
        values = v.get("values")
        _vreq(isinstance(values, list), "%s: values is not a list" % where)
        _vreq(len(values) == math.prod(shape), "%s: %d values for shape %r" % (where, len(values), shape))
        if dtype in ("float32", "float64"):
            values = [_float_in(x, where) for x in values]
        elif dtype == "bool":
            for x in values:
                _vreq(x is True or x is False or (_is_int(x) and x in (0, 1)),
                      "%s: not a bool: %r" % (where, x))
            values = [bool(x) for x in values]
        else:
            lo, hi = INT_RANGES[dtype]
            for x in values:
                _vreq(_is_int(x) and lo <= x <= hi, "%s: not an integer of %s: %r" % (where, dtype, x))
        t = torch.tensor(values, dtype=tdtype).reshape(shape)
        if dtype == "float32" and values:
            wide = torch.tensor(values, dtype=torch.float64)
            over = torch.isinf(t.reshape(-1)) & torch.isfinite(wide)
            _vreq(not bool(over.any()), "%s: a value is outside float32" % where)
        digest = v.get("bytes_sha256")
        if digest is not None:
            _vreq(isinstance(digest, str) and len(digest) == 64
                  and all(c in "0123456789abcdef" for c in digest),
                  "%s: bytes_sha256 is not a SHA-256 digest" % where)
            if digest != tensor_sha256(t) and not (t.is_floating_point() and bool(torch.isnan(t).any())):
                raise ValueError_("%s: bytes_sha256 does not match its values" % where)
        return t
    if kind == "int":
        x = v.get("value")
        _vreq(_is_int(x) and INT_RANGES["int64"][0] <= x <= INT_RANGES["int64"][1],
              "%s: bad int %r" % (where, x))
        return x
    if kind == "float":
        return _float_in(v.get("value"), where)
    if kind == "bool":
        x = v.get("value")
        _vreq(x is True or x is False or (_is_int(x) and x in (0, 1)), "%s: bad bool %r" % (where, x))
        return bool(x)
    if kind == "none":
        return None
    raise ValueError_("%s: unknown kind %r" % (where, kind))


def tensor_sha256(t):
    flat = t.detach().reshape(-1).contiguous()
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"").hexdigest()


def _float_out(x):
    if x != x:
        return "NaN"
    return "inf" if x > 0 else "-inf"


def encode_value(o, where):
    """A torch value in the corpus encoding; tensors carry bytes_sha256."""
    if isinstance(o, torch.Tensor):
        dtype = CORPUS_NAMES.get(o.dtype)
        if dtype is None:
            raise ValueError("%s: dtype %s is not in the corpus encoding" % (where, o.dtype))
        o = o.detach().contiguous()
        vals = o.reshape(-1).tolist()
        if dtype in ("float32", "float64"):
            vals = [x if -_INF < x < _INF else _float_out(x) for x in vals]
        return {"kind": "tensor", "dtype": dtype, "shape": list(o.shape), "values": vals,
                "bytes_sha256": tensor_sha256(o)}
    if o is None:
        return {"kind": "none"}
    if o is True or o is False:
        return {"kind": "bool", "value": o}
    if isinstance(o, int):
        return {"kind": "int", "value": int(o)}
    if isinstance(o, float):
        return {"kind": "float", "value": o if -_INF < o < _INF else _float_out(o)}
    raise ValueError("%s: unsupported output type %s" % (where, type(o).__name__))


def fits(v, t):
    """Whether value `v` has IR type `t` (dynamic tensors: same rank, within the bound)."""
    if isinstance(t, str):
        if t == "int":
            return _is_int(v)
        if t == "bool":
            return v is True or v is False
        return isinstance(v, float)
    d = t["tensor"]
    if not isinstance(v, torch.Tensor) or v.dtype != IR_DTYPES[d["dtype"]]:
        return False
    if d.get("dynamic"):
        # As src/ir/eval.rs `fits`: same rank, every size within the bound.
        return v.dim() == len(d["shape"]) and all(a <= b for a, b in zip(v.shape, d["shape"]))
    return list(v.shape) == d["shape"]


def describe_type(t):
    if isinstance(t, str):
        return t
    d = t["tensor"]
    return "%s%s%s" % (d["dtype"], d["shape"], " dynamic" if d.get("dynamic") else "")


def sample_inputs(graph, seed=1):
    """Deterministic tame inputs of a graph's types (multiples of 1/256 in about +-3.9, ints in
    [-10, 10], dynamic tensors at their bound), for a reproducer run without --inputs."""
    state = [(seed * 0x9E3779B97F4A7C15 + 1) & 0xFFFFFFFFFFFFFFFF]

    def nxt():
        s = state[0]
        s ^= (s << 13) & 0xFFFFFFFFFFFFFFFF
        s ^= s >> 7
        s ^= (s << 17) & 0xFFFFFFFFFFFFFFFF
        state[0] = s
        return s

    out = []
    for t in graph["inputs"]:
        if isinstance(t, str):
            out.append({"int": lambda: nxt() % 7, "bool": lambda: nxt() % 2 == 0,
                        "double": lambda: ((nxt() % 2001) - 1000.0) / 64.0}[t]())
            continue
        d = t["tensor"]
        n = math.prod(d["shape"])
        if n > MAX_MADE_UP_ELEMENTS:
            raise BuildError("input of %d elements is too large to make up" % n)
        if d["dtype"] == "f32":
            vals = [((nxt() % 2001) - 1000.0) / 256.0 for _ in range(n)]
        elif d["dtype"] == "i64":
            vals = [(nxt() % 21) - 10 for _ in range(n)]
        else:
            vals = [nxt() % 2 == 1 for _ in range(n)]
        out.append(torch.tensor(vals, dtype=IR_DTYPES[d["dtype"]]).reshape(d["shape"]))
    return out


def example_of(t):
    """A made-up value of IR type `t` (zeros; dynamic tensors at their bound)."""
    if isinstance(t, str):
        return {"int": 0, "bool": False, "double": 0.0}[t]
    d = t["tensor"]
    n = math.prod(d["shape"])
    if n > MAX_MADE_UP_ELEMENTS:
        raise BuildError("an example input of %d elements is too large to make up" % n)
    return torch.zeros(d["shape"], dtype=IR_DTYPES[d["dtype"]])


def const_tensor(c, where):
    vals = [float("nan") if v is None else v for v in c["values"]]
    dtype = IR_DTYPES[c["dtype"]]
    if c["dtype"] == "f32":
        t = torch.tensor(vals, dtype=torch.float64).to(torch.float32)
    elif c["dtype"] == "i64":
        # `as i64` in Rust: truncation toward zero, saturating, NaN -> 0.
        lo, hi = INT_RANGES["int64"]
        t = torch.tensor([0 if v != v else max(lo, min(hi, int(v))) for v in vals], dtype=torch.int64)
    else:
        t = torch.tensor([v != 0.0 for v in vals], dtype=torch.bool)
    return t.reshape(c["shape"]).to(dtype)


# --- Operators --------------------------------------------------------------------------------
def _wrap64(v):
    """int64 two's complement wrapping of a plain Python int (SymInts are left to the program)."""
    if v.__class__ is int:
        return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)
    return v


def _floordiv(a, b):
    if b.__class__ is int and b == 0:
        raise ZeroDivisionError("scalar_floordiv %r // 0" % (a,))
    return _wrap64(a // b)


def _need_int(name, v):
    if isinstance(v, bool) or isinstance(v, torch.Tensor):
        raise BuildError("%s needs Int operands, got %s" % (name, type(v).__name__))
    return v


def _scalar(fn, name):
    return lambda a, b: fn(_need_int(name, a), _need_int(name, b))


# name -> (arity, factory(params) -> callable)
OPERATORS = {
    "add": (2, lambda p: torch.add),
    "sub": (2, lambda p: torch.sub),
    "mul": (2, lambda p: torch.mul),
    "div": (2, lambda p: torch.div),
    "relu": (1, lambda p: torch.relu),
    "sin": (1, lambda p: torch.sin),
    "cos": (1, lambda p: torch.cos),
    "linear": (3, lambda p: torch.nn.functional.linear),
    "addmm": (3, lambda p: torch.addmm),
    "mm": (2, lambda p: torch.mm),
    "permute_copy": (1, lambda p: functools.partial(torch.permute_copy, dims=list(p["dims"]))),
    "cumsum": (1, lambda p: functools.partial(torch.cumsum, dim=p["dim"])),
    "select_copy": (1, lambda p: functools.partial(torch.select_copy, dim=p["dim"], index=p["index"])),
    "index_select": (2, lambda p: (lambda x, idx, d=p["dim"]: torch.index_select(x, d, idx))),
    "argmax": (1, lambda p: functools.partial(torch.argmax, dim=p["dim"], keepdim=p["keepdim"])),
    "gt": (1, lambda p: (lambda x, o=float(p["other"]): torch.gt(x, o))),
    "gt_tensor": (2, lambda p: torch.gt),
    "view": (1, lambda p: (lambda x, s=list(p["shape"]): x.view(s))),
    "sym_size": (1, lambda p: (lambda x, d=p["dim"]: x.size(d))),
    "scalar_add": (2, lambda p: _scalar(lambda a, b: _wrap64(a + b), "scalar_add")),
    "scalar_sub": (2, lambda p: _scalar(lambda a, b: _wrap64(a - b), "scalar_sub")),
    "scalar_mul": (2, lambda p: _scalar(lambda a, b: _wrap64(a * b), "scalar_mul")),
    "scalar_floordiv": (2, lambda p: _scalar(_floordiv, "scalar_floordiv")),
    "scalar_eq": (2, lambda p: _scalar(lambda a, b: a == b, "scalar_eq")),
    "scalar_lt": (2, lambda p: _scalar(lambda a, b: a < b, "scalar_lt")),
    "scalar_gt": (2, lambda p: _scalar(lambda a, b: a > b, "scalar_gt")),
    "scalar_ge": (2, lambda p: _scalar(lambda a, b: a >= b, "scalar_ge")),
    "scalar_le": (2, lambda p: _scalar(lambda a, b: a <= b, "scalar_le")),
}
_OP_PARAMS = {
    "permute_copy": {"dims": list}, "cumsum": {"dim": int}, "select_copy": {"dim": int, "index": int},
    "index_select": {"dim": int}, "argmax": {"dim": (int, type(None)), "keepdim": bool},
    "gt": {"other": (int, float)}, "view": {"shape": list}, "sym_size": {"dim": int},
}


def make_op(op, where):
    name = op.get("op")
    if name not in OPERATORS:
        raise BuildError("%s: unknown operator %r" % (where, name))
    params = {k: v for k, v in op.items() if k != "op"}
    want = _OP_PARAMS.get(name, {})
    if set(params) != set(want):
        raise BuildError("%s: %s takes parameters %s, got %s" % (where, name, sorted(want), sorted(params)))
    for k, ty in want.items():
        v = params[k]
        if not isinstance(v, ty) or (ty is int and isinstance(v, bool)):
            raise BuildError("%s: %s.%s has the wrong type (%r)" % (where, name, k, v))
        if ty is list and not all(_is_int(x) for x in v):
            raise BuildError("%s: %s.%s must list integers" % (where, name, k))
    arity, factory = OPERATORS[name]
    return name, arity, factory(params)


# --- The torch module of a graph --------------------------------------------------------------
class _Sites:
    def __init__(self):
        self.next = 0


class IRGraph(torch.nn.Module):
    """One closed IR graph as a module; forward(*inputs) returns the tuple of its outputs.

    `callee(i, site)` gives what call site `site` (of module i) calls: a per-site copy of the
    module's LoweredBackendModule (export mode, see site_callee) or the module's plain IRGraph
    (eager mode). `sites` numbers call nodes in pre-order, as src/ir/eval.rs does (None: not a
    method graph, calls are not numbered). Constants become buffers c0, c1, ...; sub-graphs
    become child modules nI_then / nI_else / nI_body / nI_cond.
    """

    def __init__(self, graph, modules, callee, mode, where, sites):
        super().__init__()
        self.ptecheck_where = where
        self.ptecheck_mode = mode
        consts = graph.get("constants", []) or []
        for i, c in enumerate(consts):
            self.register_buffer("c%d" % i, const_tensor(c, "%s.constants[%d]" % (where, i)))
        self.ptecheck_nconst = len(consts)
        self.ptecheck_inputs = list(graph["inputs"])
        steps = []
        nvals = len(consts) + len(graph["inputs"])

        def refs(rs, w):
            for r in rs:
                if r >= nvals:
                    raise BuildError("%s: ref %d undefined (%d defined so far)" % (w, r, nvals))
            return list(rs)

        for i, n in enumerate(graph["nodes"]):
            w = "%s.nodes[%d]" % (where, i)
            kind = n["node"]
            if kind == "op":
                name, arity, fn = make_op(n["op"], w)
                args = refs(n["args"], w)
                if len(args) != arity:
                    raise BuildError("%s: %s takes %d operands, got %d" % (w, name, arity, len(args)))
                steps.append(("op", fn, args, name))
            elif kind == "call":
                m = n["module"]
                if m >= len(modules):
                    raise BuildError("%s: module %d does not exist" % (w, m))
                site = None
                if sites is not None:
                    site = sites.next
                    sites.next += 1
                target = callee(m, site)
                # One attribute per call site when the callee is a per-site object (see
                # site_callee), one per module otherwise.
                attr = "m%d" % m if getattr(target, SITE_ATTR, None) is None else "s%d" % site
                if not hasattr(self, attr):
                    setattr(self, attr, target)
                args = refs(n["args"], w)
                if len(args) != len(modules[m]["graph"]["inputs"]):
                    raise BuildError("%s: module %d takes %d inputs, given %d"
                                     % (w, m, len(modules[m]["graph"]["inputs"]), len(args)))
                steps.append(("call", attr, args, site, len(modules[m]["graph"]["outputs"])))
            elif kind == "cond":
                refs([n["pred"]], w)
                ops = refs(n["operands"], w)
                for key in ("then_graph", "else_graph"):
                    if len(n[key]["inputs"]) != len(ops):
                        raise BuildError("%s.%s takes %d inputs, given %d operands"
                                         % (w, key, len(n[key]["inputs"]), len(ops)))
                if len(n["then_graph"]["outputs"]) != len(n["else_graph"]["outputs"]):
                    raise BuildError("%s: the branches have different output counts" % w)
                setattr(self, "n%d_then" % i,
                        IRGraph(n["then_graph"], modules, callee, mode, w + ".then_graph", sites))
                setattr(self, "n%d_else" % i,
                        IRGraph(n["else_graph"], modules, callee, mode, w + ".else_graph", sites))
                steps.append(("cond", i, n["pred"], ops))
            elif kind == "map":
                xs = refs([n["xs"]], w)[0]
                args = refs(n["args"], w)
                if len(n["body"]["inputs"]) != 1 + len(args):
                    raise BuildError("%s.body takes %d inputs, map gives %d" % (w, len(n["body"]["inputs"]), 1 + len(args)))
                if len(n["body"]["outputs"]) != 1:
                    raise BuildError("%s.body must have one output" % w)
                setattr(self, "n%d_body" % i, IRGraph(n["body"], modules, callee, mode, w + ".body", sites))
                steps.append(("map", i, xs, args))
            elif kind == "scan":
                init = refs(n["init"], w)
                xs = refs(n["xs"], w)
                if len(n["body"]["inputs"]) != len(init) + len(xs):
                    raise BuildError("%s.body takes %d inputs, scan gives %d" % (w, len(n["body"]["inputs"]), len(init) + len(xs)))
                if len(n["body"]["outputs"]) < len(init):
                    raise BuildError("%s.body has fewer outputs than carries" % w)
                setattr(self, "n%d_body" % i, IRGraph(n["body"], modules, callee, mode, w + ".body", sites))
                steps.append(("scan", i, init, xs))
            else:  # while
                carried = refs(n["carried"], w)
                for key in ("cond", "body"):
                    if len(n[key]["inputs"]) != len(carried):
                        raise BuildError("%s.%s takes %d inputs, given %d carried"
                                         % (w, key, len(n[key]["inputs"]), len(carried)))
                if len(n["cond"]["outputs"]) != 1:
                    raise BuildError("%s.cond must have one output" % w)
                if len(n["body"]["outputs"]) != len(carried):
                    raise BuildError("%s.body must return the carried values" % w)
                setattr(self, "n%d_cond" % i, IRGraph(n["cond"], modules, callee, mode, w + ".cond", sites))
                setattr(self, "n%d_body" % i, IRGraph(n["body"], modules, callee, mode, w + ".body", sites))
                steps.append(("while", i, carried, n["max_iterations"]))
            nvals += _node_outputs(n, modules, w)
        self.ptecheck_steps = steps
        self.ptecheck_outputs = refs(graph["outputs"], where + ".outputs")

    def forward(self, *inputs):
        vals = [getattr(self, "c%d" % i) for i in range(self.ptecheck_nconst)]
        vals.extend(inputs)
        eager = self.ptecheck_mode == "eager"
        for step in self.ptecheck_steps:
            kind = step[0]
            if kind == "op":
                out = (step[1](*[vals[r] for r in step[2]]),)
            elif kind == "call":
                fn = getattr(self, step[1])
                args = [vals[r] for r in step[2]]
                if eager or step[3] is None:
                    out = fn(*args)
                else:
                    with _fx_traceback.annotate({SITE_KEY: step[3]}):
                        out = fn(*args)
                out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                if len(out) != step[4]:
                    raise RuntimeError("module call gave %d outputs, expected %d" % (len(out), step[4]))
            elif kind == "cond":
                i = step[1]
                pred = vals[step[2]]
                ops = tuple(vals[r] for r in step[3])
                then_g, else_g = getattr(self, "n%d_then" % i), getattr(self, "n%d_else" % i)
                if eager:
                    if isinstance(pred, torch.Tensor):
                        # A bool tensor is true iff every element is (ptecheck's rule).
                        truth = bool(pred.all())
                    else:
                        truth = bool(pred)
                    out = tuple((then_g if truth else else_g)(*ops))
                else:
                    out = tuple(torch.cond(pred, then_g, else_g, ops))
            elif kind == "map":
                i = step[1]
                body = getattr(self, "n%d_body" % i)
                xs = vals[step[2]]
                extra = [vals[r] for r in step[3]]
                if eager:
                    rows = [body(xs[k], *extra)[0] for k in range(xs.shape[0])]
                    if not rows:
                        raise RuntimeError("map over an empty leading dimension")
                    out = (torch.stack(rows),)
                else:
                    out = (_hop_map(lambda x, *a, _b=body: _b(x, *a)[0], xs, *extra),)
            elif kind == "scan":
                i = step[1]
                body = getattr(self, "n%d_body" % i)
                init = [vals[r] for r in step[2]]
                xs = [vals[r] for r in step[3]]
                nc = len(init)
                if eager:
                    carries = init
                    n = xs[0].shape[0] if xs else 0
                    ys = None
                    for k in range(n):
                        o = list(body(*carries, *[x[k] for x in xs]))
                        carries = o[:nc]
                        if ys is None:
                            ys = [[] for _ in o[nc:]]
                        for slot, y in zip(ys, o[nc:]):
                            slot.append(y)
                    if ys is None:
                        raise RuntimeError("scan of no iteration")
                    out = tuple(carries) + tuple(torch.stack(y) for y in ys)
                else:
                    def combine(carry, x, _b=body, _nc=nc):
                        o = list(_b(*carry, *x))
                        return o[:_nc], o[_nc:]
                    carries, ys = _hop_scan(combine, init, xs)
                    out = tuple(carries) + tuple(ys)
            else:  # while
                i = step[1]
                cond_g = getattr(self, "n%d_cond" % i)
                body = getattr(self, "n%d_body" % i)
                carried = tuple(vals[r] for r in step[2])
                if eager:
                    count = 0
                    while True:
                        c = cond_g(*carried)[0]
                        if not bool(c.all() if isinstance(c, torch.Tensor) else c):
                            break
                        count += 1
                        if count > step[3]:
                            raise RuntimeError("while_loop exceeded %d iterations" % step[3])
                        carried = tuple(body(*carried))
                    out = carried
                else:
                    out = tuple(_hop_while_loop(lambda *c, _g=cond_g: _g(*c)[0],
                                                lambda *c, _b=body: tuple(_b(*c)), carried))
            vals.extend(out)
        return tuple(vals[r] for r in self.ptecheck_outputs)


# --- Backends ExecuTorch does not have: pass-through preprocess --------------------------------
class _PassThrough:
    """What the pass-through preprocess returns for the module being lowered now (to_backend runs
    preprocess synchronously, and the exporter lowers one module at a time)."""
    processed = None
    named = None


def _passthrough_preprocess(edge_program, compile_specs):
    if _PassThrough.processed is None:
        raise RuntimeError("pass-through backend called outside lower_module")
    store = None
    if _PassThrough.named:
        nds = NamedDataStore()
        for key, data in _PassThrough.named:
            nds.add_named_data(key, data)
        store = nds.get_named_data_store_output()
    return PreprocessResult(processed_bytes=_PassThrough.processed, data_store_output=store)


PASSTHROUGH_BACKENDS = ["demo", "argkeep"]
EXTRA_PASSTHROUGH_BACKENDS = ["scratch", "multifn"]
_REGISTERED = {}


def register_backends():
    """Registers the backends this builder lowers to; returns their ids."""
    ids = []
    if not _REGISTERED:
        wanted = list(PASSTHROUGH_BACKENDS)
        if os.environ.get("PTECHECK_EXIR_EXTRA_BACKENDS") == "1":
            wanted += EXTRA_PASSTHROUGH_BACKENDS
        existing = {c.__name__ for c in BackendDetails.__subclasses__()}
        for name in wanted:
            if name in existing:
                continue
            # A direct BackendDetails subclass named exactly as the backend id.
            _REGISTERED[name] = type(name, (BackendDetails,), {
                "preprocess": staticmethod(_passthrough_preprocess),
                "__module__": __name__,
                "__doc__": "ptecheck's %s backend: preprocess returns the saved program's "
                           "processed bytes." % name})
        try:
            from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend  # noqa: F401
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        try:
            import executorch.exir.backend.test.backend_with_compiler_demo  # noqa: F401
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    names = {c.__name__ for c in BackendDetails.__subclasses__()}
    for b in ["XnnpackBackend", "BackendWithCompilerDemo"] + PASSTHROUGH_BACKENDS:
        if b in names:
            ids.append(b)
    return ids


def passthrough_ids():
    """The backend ids whose preprocess is the pass-through of this builder."""
    return sorted(_REGISTERED)


def _no_calls(where):
    def callee(m, site):
        raise BuildError("%s: a lowered module's graph calls module %d" % (where, m))
    return callee


# --- The pipeline -----------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.seconds = {"build": 0.0, "export": 0.0, "lower": 0.0, "emit": 0.0, "eager": 0.0}

    def run(self, stage, fn, *a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        except StageError:
            raise
        except BaseException as e:  # noqa: BLE001  (KeyboardInterrupt/SystemExit pass below)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise StageError(stage, e) from e
        finally:
            self.seconds[stage] += time.perf_counter() - t


def _dynamic_shapes(types, name):
    """dynamic_shapes for torch.export: one Dim shared by every dynamic tensor (bound > 1)."""
    bounds = [t["tensor"]["shape"][0] for t in types
              if isinstance(t, dict) and t["tensor"].get("dynamic") and t["tensor"]["shape"]]
    if not bounds:
        return None
    dim = torch.export.Dim(name, min=1, max=min(bounds)) if min(bounds) > 1 else None
    if dim is None:
        return None
    spec = []
    for t in types:
        if isinstance(t, dict) and t["tensor"].get("dynamic") and t["tensor"]["shape"]:
            spec.append({0: dim})
        else:
            spec.append(None)
    # forward(*inputs): the specs of a var-positional parameter go under its name.
    return {"inputs": tuple(spec)}


def export_examples(args, types):
    """The example inputs torch.export traces with: the given ones, except that when a dynamic
    leading size is below 2 every dynamic tensor is made up at its bound (zeros): torch.export
    specialises a size-0/1 example to a constant and then refuses the dynamic marking."""
    dyn = [i for i, t in enumerate(types)
           if isinstance(t, dict) and t["tensor"].get("dynamic") and t["tensor"]["shape"]]
    if not dyn or all(isinstance(args[i], torch.Tensor) and args[i].dim() > 0 and args[i].shape[0] >= 2
                      for i in dyn):
        return list(args)
    out = list(args)
    for i in dyn:
        out[i] = example_of(types[i])
    return out


def _export(mod, args, types, dim_name, strict_order):
    ds = _dynamic_shapes(types, dim_name)
    if ds is not None:
        args = export_examples(args, types)
    errors = []
    for strict in strict_order:
        try:
            ep = torch.export.export(mod, tuple(args), dynamic_shapes=ds, strict=strict)
            return ep, strict, errors
        except Exception as e:  # noqa: BLE001
            errors.append((strict, e))
    if len(errors) == 1:
        raise errors[0][1]
    raise RuntimeError("; ".join("%s: %s" % ("strict" if s else "non-strict", describe_exception(e, 700))
                                 for s, e in errors)) from errors[-1][1]


def _used_modules(program):
    used = set()
    for m in program["methods"]:
        for i in call_sites(m["graph"]):
            if i >= len(program["modules"]):
                raise BuildError("method %s calls module %d; the program has %d"
                                 % (m["name"], i, len(program["modules"])))
            used.add(i)
    return sorted(used)


def _strict_order():
    mode = os.environ.get("PTECHECK_EXIR_STRICT", "auto")
    if mode == "1":
        return (True,)
    if mode == "0":
        return (False,)
    return (False, True)


def lower_module(program, index, clock, info):
    """torch.export + to_edge of module `index`'s graph, then to_backend to its backend."""
    mod = program["modules"][index]
    backend = mod["backend"]
    where = "modules[%d]" % index
    g = clock.run("build", lambda: IRGraph(mod["graph"], program["modules"], _no_calls(where),
                                           "export", where + ".graph", None))
    args = clock.run("build", lambda: [example_of(t) for t in mod["graph"]["inputs"]])
    ep, strict, _ = clock.run("export", _export, g, args, mod["graph"]["inputs"], "m%d" % index, _strict_order())
    edge = clock.run("export", to_edge, ep)
    specs = module_specs(mod)
    passthrough = backend in passthrough_ids()

    def lower():
        if passthrough:
            _PassThrough.processed = module_bytes(mod)
            _PassThrough.named = ([(b["key"], bytes.fromhex(b["data"])) for b in program.get("named_data", []) or []]
                                  if backend == "multifn" else None)
        try:
            return to_backend(backend, edge.exported_program(), specs)
        finally:
            _PassThrough.processed = None
            _PassThrough.named = None
    lowered = clock.run("lower", lower)
    info["modules"][index] = {"backend": backend, "strict": strict,
                              "processed_len": len(lowered.processed_bytes),
                              "processed_sha256": hashlib.sha256(lowered.processed_bytes).hexdigest()}
    return lowered


def site_callee(lowered, site):
    """What call site `site` calls: a shallow copy of the module's LoweredBackendModule that
    carries the site number as an attribute. torch.export copies the lowered modules it finds
    (one object per graph body at least) but keeps their attributes, so after to_executorch the
    module a call_delegate node calls still names its IR site. The copy shares processed bytes,
    compile specs and the original program with the module, so what is emitted is the same as
    for one shared object: ExecuTorch's emitter makes one BackendDelegate per DelegateCall and
    stores a processed blob once per sha256 whatever the objects.
    PTECHECK_EXIR_SITE_OBJECTS=0 calls the one shared object instead (sites are then known
    from node metadata only, which non-strict export loses inside control-flow bodies)."""
    if site is None or os.environ.get("PTECHECK_EXIR_SITE_OBJECTS", "1") == "0":
        return lowered
    c = copy.copy(lowered)
    object.__setattr__(c, SITE_ATTR, site)
    return c


def _delegate_nodes(gm, out):
    """executorch_call_delegate nodes of `gm` in the order ExecuTorch's emitter emits them: graph
    order, a higher-order op's sub-graphs in argument order (cond: true, then false) where it
    stands."""
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is executorch_call_delegate:
            callee = n.args[0]
            obj = functools.reduce(getattr, callee.target.split("."), gm) \
                if isinstance(callee, torch.fx.Node) and callee.op == "get_attr" else None
            out.append((n, obj))
            continue
        for a in n.args:
            if isinstance(a, torch.fx.Node) and a.op == "get_attr":
                sub = functools.reduce(getattr, a.target.split("."), gm)
                if isinstance(sub, torch.fx.GraphModule):
                    _delegate_nodes(sub, out)


def _plan(program, name):
    for p in program.execution_plan:
        if p.name == name:
            return p
    raise RuntimeError("no execution plan named %r" % name)


def _delegate_calls(plan):
    out = []
    for chain in plan.chains:
        for ins in chain.instructions:
            if type(ins.instr_args).__name__ == "DelegateCall":
                out.append(ins.instr_args.delegate_index)
    return out


def map_delegates(program, manager, name):
    """Per call site of method `name` (pre-order), the delegate index of its DelegateCall in the
    emitted plan, or None when the site was not emitted.

    The k-th executorch_call_delegate node of the final graph (walked in emission order) is the
    k-th DelegateCall of the plan; the node's meta["custom"]["ptecheck_site"] (set by
    torch.fx.traceback.annotate when the site was traced) names its IR site."""
    method = next(m for m in program["methods"] if m["name"] == name)
    sites = call_sites(method["graph"])
    nodes = []
    _delegate_nodes(manager.exported_program(name).graph_module, nodes)
    plan = _plan(manager.executorch_program, name)
    calls = _delegate_calls(plan)
    if len(nodes) != len(calls):
        raise RuntimeError("method %s: %d delegate nodes in the graph but %d DelegateCalls emitted"
                           % (name, len(nodes), len(calls)))
    result = [None] * len(sites)
    for k, ((node, obj), dindex) in enumerate(zip(nodes, calls)):
        site = getattr(obj, SITE_ATTR, None)
        if site is None:
            site = (node.meta.get("custom") or {}).get(SITE_KEY)
        if not _is_int(site) or not 0 <= site < len(sites):
            raise RuntimeError("method %s: DelegateCall %d has no call-site tag (%r)" % (name, k, site))
        if result[site] is not None:
            raise RuntimeError("method %s: call site %d emitted twice (DelegateCalls %d and another)"
                               % (name, site, k))
        want = program["modules"][sites[site]]["backend"]
        got = plan.delegates[dindex].id
        if got != want:
            raise RuntimeError("method %s: DelegateCall %d (site %d) calls a %s delegate, the site a %s module"
                               % (name, k, site, got, want))
        result[site] = dindex
    return result


def export_program(program, inputs, with_eager=True):
    """The whole pipeline. `inputs`: method name -> list of torch values. Returns a dict with
    pte (bytes), ptd (bytes or None), eager (name -> list of torch values, or None), delegates,
    seconds, info; raises StageError."""
    clock = Clock()
    info = {"modules": {}, "methods": {}}
    register_backends()
    used = clock.run("build", _used_modules, program)
    lowered = {}
    for i in used:
        lowered[i] = lower_module(program, i, clock, info)

    def callee_of(i, site):
        if i not in lowered:
            raise BuildError("module %d is not lowered" % i)
        return site_callee(lowered[i], site)

    eps = {}
    for m in program["methods"]:
        name = m["name"]
        g = clock.run("build", lambda: IRGraph(m["graph"], program["modules"], callee_of, "export",
                                               "methods[%s].graph" % name, _Sites()))
        ep, strict, errs = clock.run("export", _export, g, inputs[name], m["graph"]["inputs"], "n_" + name,
                                     _strict_order())
        info["methods"][name] = {"strict": strict,
                                 "non_strict_error": describe_exception(errs[0][1], 300) if errs else None}
        eps[name] = ep
    edge = clock.run("export", to_edge, eps)
    manager = clock.run("emit", edge.to_executorch)
    pte = clock.run("emit", lambda: bytes(manager.buffer))

    def ptd():
        files = manager.data_files if hasattr(manager, "data_files") else {}
        if not files:
            return None
        if len(files) > 1:
            raise RuntimeError("%d external data files (%s); the protocol carries one"
                               % (len(files), ", ".join(sorted(files))))
        return next(iter(files.values()))
    ptd_bytes = clock.run("emit", ptd)
    delegates = clock.run("emit", lambda: {n: map_delegates(program, manager, n) for n in method_names(program)})
    info["manager"] = manager
    eager = None
    if with_eager:
        eager = clock.run("eager", eager_outputs, program, inputs)
    return {"pte": pte, "ptd": ptd_bytes, "eager": eager, "delegates": delegates,
            "seconds": clock.seconds, "info": info}


def eager_outputs(program, inputs):
    """Runs every method of the un-lowered program (calls go to the modules' plain graphs)."""
    plain = {}

    def callee(i, site):
        if i not in plain:
            mod = program["modules"][i]
            plain[i] = IRGraph(mod["graph"], program["modules"], _no_calls("modules[%d]" % i),
                               "eager", "modules[%d].graph" % i, None)
        return plain[i]

    out = {}
    with torch.no_grad():
        for m in program["methods"]:
            g = IRGraph(m["graph"], program["modules"], callee, "eager", "methods[%s].graph" % m["name"], None)
            out[m["name"]] = list(g(*inputs[m["name"]]))
    return out


def check_inputs(program, inputs):
    """Raises ValueError_ unless every method has inputs of its declared types."""
    for m in program["methods"]:
        name = m["name"]
        got = inputs.get(name)
        if got is None:
            raise ValueError_("no inputs for method %r" % name)
        types = m["graph"]["inputs"]
        if len(got) != len(types):
            raise ValueError_("method %r takes %d inputs, %d given" % (name, len(types), len(got)))
        for i, (v, t) in enumerate(zip(got, types)):
            if not fits(v, t):
                raise ValueError_("method %r input %d does not have type %s" % (name, i, describe_type(t)))
    extra = set(inputs) - set(method_names(program))
    if extra:
        raise ValueError_("inputs for methods the program lacks: %s" % ", ".join(sorted(extra)))


# --- Reading the emitted program back (for reproducers and notes) ----------------------------
def pte_summary(pte):
    """Structure of a serialised .pte as ExecuTorch reads its flatbuffer (segments not folded
    back): per plan the delegates (id, location, blob size and sha256) and the delegate index of
    each DelegateCall in instruction order; the counts of segments and inline blobs; kernels."""
    from executorch.exir._serialize._program import _flatbuffer_to_program, _get_extended_header
    eh = _get_extended_header(pte)
    size = eh.program_size if eh is not None and eh.is_valid() else len(pte)
    base = eh.segment_base_offset if eh is not None and eh.is_valid() else 0
    prog = _flatbuffer_to_program(pte[:size])

    def blob(d):
        loc = d.processed.location
        idx = d.processed.index
        if str(loc).endswith("INLINE") or int(getattr(loc, "value", loc)) == 0:
            data = bytes(prog.backend_delegate_data[idx].data)
            return "inline[%d]" % idx, data
        seg = prog.segments[idx]
        data = pte[base + seg.offset: base + seg.offset + seg.size]
        return "segment[%d]" % idx, data

    plans = []
    for p in prog.execution_plan:
        ds = []
        for d in p.delegates:
            where, data = blob(d)
            ds.append({"id": d.id, "where": where, "size": len(data),
                       "sha256": hashlib.sha256(data).hexdigest(),
                       "compile_specs": [(c.key, bytes(c.value).hex()) for c in d.compile_specs]})
        kernels = []
        for chain in p.chains:
            for ins in chain.instructions:
                if type(ins.instr_args).__name__ == "KernelCall":
                    op = p.operators[ins.instr_args.op_index]
                    kernels.append("%s.%s" % (op.name, op.overload or "default"))
        plans.append({"name": p.name, "delegates": ds, "delegate_calls": _delegate_calls(p),
                      "operators": ["%s.%s" % (o.name, o.overload or "default") for o in p.operators],
                      "kernel_calls": kernels})
    blobs = {(d["where"]) for p in plans for d in p["delegates"]}
    return {"plans": plans, "segments": len(prog.segments), "inline_blobs": len(prog.backend_delegate_data),
            "delegate_blobs": len(blobs),
            "delegate_blob_segments": sum(1 for b in blobs if b.startswith("segment")),
            "delegate_blob_inline": sum(1 for b in blobs if b.startswith("inline")),
            "named_data": len(getattr(prog, "named_data", None) or [])}


def b64(data):
    return None if data is None else base64.b64encode(data).decode("ascii")

PROGRAM_JSON = '{"schema_version":[5,6],"program":{"methods":[{"name":"forward","graph":{"inputs":[{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1],"dynamic":true}}],"nodes":[{"node":"op","op":{"op":"gt","other":-1.25},"args":[0]},{"node":"cond","pred":3,"then_graph":{"inputs":[{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1]}}],"nodes":[{"node":"op","op":{"op":"gt_tensor"},"args":[1,0]},{"node":"op","op":{"op":"cumsum","dim":0},"args":[0]},{"node":"call","module":0,"args":[3,1]},{"node":"call","module":0,"args":[0,0]}],"outputs":[5,2]},"else_graph":{"inputs":[{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1]}}],"nodes":[{"node":"op","op":{"op":"sin"},"args":[0]},{"node":"op","op":{"op":"gt_tensor"},"args":[2,2]}],"outputs":[2,3]},"operands":[0,1]},{"node":"op","op":{"op":"select_copy","dim":1,"index":0},"args":[4]},{"node":"op","op":{"op":"cumsum","dim":0},"args":[2]},{"node":"op","op":{"op":"gt","other":-2.0},"args":[4]},{"node":"cond","pred":8,"then_graph":{"inputs":[{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1]}}],"nodes":[{"node":"op","op":{"op":"cumsum","dim":0},"args":[1]},{"node":"op","op":{"op":"permute_copy","dims":[1,0]},"args":[1]}],"outputs":[2,3]},"else_graph":{"inputs":[{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1]}}],"nodes":[{"node":"op","op":{"op":"cumsum","dim":1},"args":[1]},{"node":"op","op":{"op":"mul"},"args":[0,1]},{"node":"op","op":{"op":"permute_copy","dims":[1,0]},"args":[3]}],"outputs":[3,4]},"operands":[0,0]},{"node":"op","op":{"op":"add"},"args":[0,4]}],"outputs":[11,7,5,6,10]}}],"modules":[{"backend":"argkeep","graph":{"inputs":[{"tensor":{"dtype":"f32","shape":[1,1]}},{"tensor":{"dtype":"f32","shape":[1,1]}}],"nodes":[{"node":"op","op":{"op":"add"},"args":[1,1]}],"outputs":[2]},"processed":"505445434845434b2d4752415048001c0000004554313200000000100018000000140010000c000800040010000000140000002800000034000000340000003400000008ffffff0400000001000000000000000000000000000000010000000800000004000400040000000000000000000000010000001c000000000016002800240020001c001800140010000c00080004001600000024000000380000003800000060000000c4000000c8000000d0000000f40100000c02000002000000000000000000000030000000000000000000000000000000010000000400000040feffff080000000c000000030000006f757400090000006174656e3a3a616464000000010000001000000000000a0010000c00080004000a0000000c0000004400000044000000010000000400000080ffffff1000000000000001080008000000040008000000040000000500000001000000010000000300000002000000020000000000000000000000010000000200000002000000000000000100000004000000cc000000700000002c000000040000004cffffff0c000000000206000c00040006000000010000000000000008000c000b000400080000000800000000000005c2ffffff10000000180000001c0000000000000638ffffff20000000010000000200000000010000020000000100000001000000b0ffffff18000000000512001400130000000c0008000000000004001200000010000000180000001c0000000000000688ffffff1000000001000000020000000001000002000000010000000100000008000a00090004000800000018000000000512001200110000000c0008000000000004001200000014000000180000001c00000000060600080004000600000001000000020000000001000002000000010000000100000008000c000800040008000000080000000c0000000000000000000000000000000000000007000000666f727761726400","compile_specs":[["k0","00"],["k1","03"]],"share_handle_across_calls":false,"scratch_specs":[]}]}}'
INPUTS_JSON = '{"forward":[{"kind":"tensor","dtype":"float32","shape":[1,1],"values":[-3.90625],"bytes_sha256":"9ca5edc6f5fd4a9c374d4af043f5d5f233edcca5aca0e5c0adf0b78c547641e9"},{"kind":"tensor","dtype":"float32","shape":[1,1],"values":[-3.90625],"bytes_sha256":"9ca5edc6f5fd4a9c374d4af043f5d5f233edcca5aca0e5c0adf0b78c547641e9"},{"kind":"tensor","dtype":"float32","shape":[1,1],"values":[-3.90625],"bytes_sha256":"9ca5edc6f5fd4a9c374d4af043f5d5f233edcca5aca0e5c0adf0b78c547641e9"}]}'
EXPECTED_JSON = None

# ============================================================================================
# Reproducer: the program above, through ExecuTorch's pipeline, then run by ExecuTorch's runtime.
# (runners/repro_main.py: the harness appends it after exir_build.py and the program.)
# ============================================================================================
import json as _json
import os as _os
import sys as _sys
import tempfile as _tempfile


def _run_in_executorch(pte, name, inputs):
    """The method's outputs as ExecuTorch's runtime computes them (pybindings)."""
    from executorch.extension.pybindings import portable_lib as _et
    with _tempfile.TemporaryDirectory() as d:
        path = _os.path.join(d, "program.pte")
        with open(path, "wb") as f:
            f.write(pte)
        method = _et._load_program(path).load_method(name)
        method.set_inputs(list(inputs))
        method.execute()
        return list(method.get_outputs(True))


def _export_inlined(program, inputs):
    """The program with every call traced through its module's own graph (no lowering), through
    the same pipeline: a program ExecuTorch's runtime runs whatever backends it has."""
    plain = {}

    def callee(i, site):
        if i not in plain:
            mod = program["modules"][i]
            plain[i] = IRGraph(mod["graph"], program["modules"], _no_calls("modules[%d]" % i), "export",
                               "modules[%d].graph" % i, None)
        return plain[i]
    eps = {}
    for m in program["methods"]:
        g = IRGraph(m["graph"], program["modules"], callee, "export", "methods[%s].graph" % m["name"], _Sites())
        eps[m["name"]] = _export(g, inputs[m["name"]], m["graph"]["inputs"], "n_" + m["name"], _strict_order())[0]
    return bytes(to_edge(eps).to_executorch().buffer)


def _compare(label, eager, ran, wrong, name):
    for i, (want_o, got_o) in enumerate(zip(eager, ran)):
        same = _same(want_o, got_o)
        show = lambda o, w: _json.dumps(encode_value(o, w)["values"] if hasattr(o, "shape") else encode_value(o, w))
        print("  output %d: torch eager %s" % (i, show(want_o, "eager")))
        print("            %-11s %s%s" % (label, show(got_o, "ran"), "" if same else "   <-- differs"))
        if not same:
            wrong.append("method %s: output %d of %s differs from torch's eager output" % (name, i, label))


def _same(a, b):
    """Equal as ptecheck compares outputs from another framework: NaN equals NaN, the sign of a
    zero is not compared, floats within the tolerance given."""
    ea, eb = encode_value(a, "a"), encode_value(b, "b")
    if ea.get("kind") != eb.get("kind") or ea.get("shape") != eb.get("shape") or ea.get("dtype") != eb.get("dtype"):
        return False
    if ea["kind"] != "tensor":
        return ea.get("value") == eb.get("value")
    for x, y in zip(ea["values"], eb["values"]):
        if x == y or (x == "NaN" and y == "NaN"):
            continue
        if isinstance(x, float) and isinstance(y, float) and abs(x - y) <= 1e-5 * max(1.0, abs(x)):
            continue
        return False
    return True


def _main():
    program = read_program(_json.loads(PROGRAM_JSON))
    if INPUTS_JSON is not None:
        raw = _json.loads(INPUTS_JSON)
        inputs = {name: [decode_value(v, "%s[%d]" % (name, i)) for i, v in enumerate(vals)]
                  for name, vals in raw.items()}
    else:
        inputs = {m["name"]: sample_inputs(m["graph"], seed=1) for m in program["methods"]}
    check_inputs(program, inputs)
    expected = _json.loads(EXPECTED_JSON) if EXPECTED_JSON is not None else {}
    print("executorch %s, torch %s" % (_version("executorch"), torch.__version__))
    print("backends registered here: %s" % ", ".join(register_backends()))
    try:
        res = export_program(program, inputs)
    except StageError as e:
        print("FAILED at %s: %s" % (e.stage, describe_exception(e.exc, 4000)))
        return 1
    pte = res["pte"]
    print("pte: %d bytes, sha256 %s%s" % (len(pte), hashlib.sha256(pte).hexdigest(),
                                         "" if res["ptd"] is None else ", ptd %d bytes" % len(res["ptd"])))
    for i, m in sorted(res["info"]["modules"].items()):
        print("module %d: %s, processed %d bytes sha256 %s..., exported %s" % (
            i, m["backend"], m["processed_len"], m["processed_sha256"][:16],
            "strict" if m["strict"] else "non-strict"))
    summary = pte_summary(pte)
    print("distinct delegate blobs: %d (%d in segments, %d inline)" % (
        summary["delegate_blobs"], summary["delegate_blob_segments"], summary["delegate_blob_inline"]))
    wrong = []
    for plan in summary["plans"]:
        name = plan["name"]
        print("method %s" % name)
        for k, d in enumerate(plan["delegates"]):
            print("  delegate %d: %s, %s, %d bytes, sha256 %s..., compile specs %s" % (
                k, d["id"], d["where"], d["size"], d["sha256"][:16],
                ", ".join("%s=%s" % kv for kv in d["compile_specs"]) or "none"))
        print("  DelegateCall delegate indices, in instruction order: %s" % plan["delegate_calls"])
        print("  per IR call site (pre-order): %s" % res["delegates"].get(name))
        print("  kernels: %s" % ", ".join(plan["operators"]))
        want = expected.get("delegates", {}).get(name)
        if want is not None and want != len(plan["delegates"]):
            wrong.append("method %s: %d BackendDelegates, the rules imply %d" % (name, len(plan["delegates"]), want))
        want_sites = expected.get("sites", {}).get(name)
        if want_sites is not None and want_sites != res["delegates"].get(name):
            wrong.append("method %s: call sites name delegates %s, the rules imply %s"
                         % (name, res["delegates"].get(name), want_sites))
        eager = res["eager"][name]
        try:
            ran = _run_in_executorch(pte, name, inputs[name])
            _compare("ExecuTorch", eager, ran, wrong, name)
        except Exception as e:  # noqa: BLE001  (a refusal is part of what this shows)
            # ptecheck's own test backends (demo, argkeep) have no runtime here: the same program
            # with its calls traced through their graphs shows what the pipeline makes of it.
            print("  ExecuTorch's runtime refuses it (%s); running the program with its calls inlined"
                  % describe_exception(e, 200))
            try:
                inlined = _export_inlined(program, inputs)
                _compare("inlined", eager, _run_in_executorch(inlined, name, inputs[name]), wrong, name)
            except Exception as e2:  # noqa: BLE001
                print("  the inlined program fails too: %s" % describe_exception(e2, 400))
                wrong.append("method %s: ExecuTorch's runtime refuses it" % name)
    if len(_sys.argv) > 1:
        with open(_sys.argv[1], "wb") as f:
            f.write(pte)
        print("wrote %s" % _sys.argv[1])
    for w in wrong:
        print("WRONG: %s" % w)
    return 1 if wrong else 0


def _version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:  # noqa: BLE001
        return "unknown"


if __name__ == "__main__":
    _sys.exit(_main())
