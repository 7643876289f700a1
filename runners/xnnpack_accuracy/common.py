"""Shared helpers: export a module through XNNPACK, check delegation, run it, measure error."""
import math, numpy as np, torch
from executorch.exir import to_edge_transform_and_lower
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.extension.pybindings import portable_lib as et

import executorch.backends.xnnpack.xnnpack_preprocess as _pp
_XNODES = []
_orig_ser = _pp.serialize_xnnpack_binary
def _rec_ser(graph, *a, **k):
    _XNODES.append([type(n.xnode_union).__name__ for n in graph.xnodes])
    return _orig_ser(graph, *a, **k)
_pp.serialize_xnnpack_binary = _rec_ser

def lower(mod, example):
    """returns (buffer, portable ops, delegates, instruction kinds, xnnpack node kinds)"""
    _XNODES.clear()
    ep = torch.export.export(mod.eval(), example)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    ex = edge.to_executorch()
    plan = ex.executorch_program.execution_plan[0]
    ops = [o.name + ("." + o.overload if o.overload else "") for o in plan.operators]
    dels = [d.id for d in plan.delegates]
    ninstr = [type(i.instr_args).__name__ for c in plan.chains for i in c.instructions]
    return ex.buffer, ops, dels, ninstr, [k for g in _XNODES for k in g]

_cache = {}
def run(buf, inputs):
    k = id(buf)
    if k not in _cache:
        _cache[k] = et._load_for_executorch_from_buffer(buf)
    out = _cache[k].forward([torch.as_tensor(i) for i in inputs])
    return out[0].numpy().copy()

def describe(ops, dels, instr, xn):
    return f"portable_ops={ops} delegates={dels} instrs={instr} xnn_nodes={xn}"

def delegated_only(ops, dels, instr):
    # fully delegated: exactly one DelegateCall, and no KernelCall other than memory-format/alloc plumbing
    kc = [i for i in instr if i == 'KernelCall']
    return dels == ['XnnpackBackend'] and instr.count('DelegateCall') == 1 and len(kc) == 0

F32_TINY = np.float32(np.finfo(np.float32).tiny)
def ulp32(ref32):
    """spacing of float32 at |ref| (for ref==0 or subnormal: smallest subnormal 2^-149)"""
    a = np.abs(ref32.astype(np.float32))
    sp = np.spacing(a).astype(np.float64)
    sp[~np.isfinite(a)] = np.nan
    return sp

def errstats(x, got, ref64, mask=None):
    """got: float32 result; ref64: exact-ish float64 reference. ref32=round(ref64)."""
    ref32 = ref64.astype(np.float32)
    got64 = got.astype(np.float64)
    ok = np.isfinite(ref32) & np.isfinite(got)
    if mask is not None: ok &= mask
    # non-finite disagreements
    nf_mis = (~np.isfinite(ref32) | ~np.isfinite(got)) & ~((got == ref32) | (np.isnan(got) & np.isnan(ref32)))
    if mask is not None: nf_mis &= mask
    ae = np.abs(got64 - ref32.astype(np.float64))
    ae_true = np.abs(got64 - ref64)
    ul = ae / ulp32(ref32)
    re = np.where(ref32 != 0, ae / np.abs(ref32.astype(np.float64)), np.where(ae == 0, 0, np.inf))
    ae[~ok] = 0; ul[~ok] = 0; re[~ok] = 0; ae_true[~ok] = 0
    r = {}
    r['n'] = int(ok.sum())
    r['nonfinite_mismatch'] = int(nf_mis.sum())
    if nf_mis.any():
        i = np.flatnonzero(nf_mis)[0]; r['nonfinite_example'] = (float(x.flat[i]) if x is not None else i, float(got.flat[i]), float(ref32.flat[i]))
    for name, arr in (('abs', ae), ('ulp', ul), ('rel', re)):
        i = int(np.nanargmax(arr)); r['max_' + name] = float(arr[i])
        r['at_' + name] = (float(x.flat[i]) if x is not None else i, float(got.flat[i]), float(ref32.flat[i]))
    r['exact_frac'] = float(((ae == 0) & ok).sum() / max(1, ok.sum()))
    return r, ul, ae, re

def fmt(r):
    s = f"n={r['n']} exact={r['exact_frac']:.4f} maxulp={r['max_ulp']:.3g} at x={r['at_ulp'][0]!r} got={r['at_ulp'][1]!r} ref={r['at_ulp'][2]!r} | maxabs={r['max_abs']:.3g} at x={r['at_abs'][0]!r} | maxrel={r['max_rel']:.3g} at x={r['at_rel'][0]!r}"
    if r['nonfinite_mismatch']: s += f" | NONFINITE MISMATCH {r['nonfinite_mismatch']} e.g. {r['nonfinite_example']}"
    return s
