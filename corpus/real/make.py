"""Makes real-ExecuTorch cases for corpus/real that probe XNNPACK numerics: FullyConnected with
cancelling dot products (xnn_fc_256_cancellation, methods forward = Linear(256,8) and fc_1024 =
Linear(1024,4)), transcendentals (xnn_transcendentals), exact unary ops (xnn_unary_exact) and
softmax + batch matmul (xnn_softmax_bmm). Per case it writes NAME.pte, NAME.json (the program
dump), NAME.io.json (ExecuTorch runtime runs) and NAME.meta.json, in the formats of README.md.

    VENV/bin/python corpus/real/make.py [--out DIR] [--only NAME ...] [--redump FILE.pte ...]

--out defaults to this folder. --redump writes only NAME.json of each given .pte into --out.
Each method runs once per input set, in order, on one loaded method (executorch.runtime).
matches_eager_torch: every output has eager torch's dtype and shape, and is torch.allclose to it
(rtol=1e-5, atol=1e-8, equal_nan) for floats, torch.equal otherwise; max_abs_diff_vs_eager is
per output, computed in float64. Added to the io.json format: every run also has
`eager_torch_outputs`, eager torch's outputs in the same tensor encoding.
The script prints, per case, the plan's operators, DelegateCalls and the node kinds in each
XNNPACK blob (decoded with flatc and the schema shipped in executorch.backends.xnnpack).
"""
import argparse
import collections
import copy
import dataclasses
import enum
import hashlib
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import typing

import torch
from executorch import version as et_version
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import _get_extended_header, deserialize_pte_binary

HERE = os.path.dirname(os.path.abspath(__file__))
DECODER = "executorch.exir._serialize._flatbuffer_program._flatbuffer_to_program(file[:program_size])"
ENCODING_NOTES = {
    "bytes": "bytes fields are {len, sha256, hex (<=256 bytes) or hex_head64, utf8 if printable}",
    "enums": "{name, value}",
    "unions": "a field X whose type is a union has a sibling X_type naming the chosen variant",
}
VIEW_NOTE = ("what executorch.exir._serialize._program.deserialize_pte_binary() returns: segments moved "
             "back inline; constant_buffer entries include the padding up to the next offset")
TENSOR_ENCODING = ("values are the row-major flattened elements; float32 values printed as the exact "
                   "double of the float32")


# ---------------------------------------------------------------- program dump (NAME.json)

def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def enc_bytes(b):
    b = bytes(b)
    out = {"len": len(b), "sha256": sha(b)}
    if len(b) <= 256:
        out["hex"] = b.hex()
    else:
        out["hex_head64"] = b[:64].hex()
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and text.isprintable():
        out["utf8"] = text
    return out


def is_dataclass_union(hint):
    if typing.get_origin(hint) is not typing.Union:
        return False
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return len(args) > 1 and all(dataclasses.is_dataclass(a) for a in args)


def enc(v):
    """A deserialized Program (dataclasses) as JSON: bytes, enums and unions as in ENCODING_NOTES."""
    if isinstance(v, enum.Enum):
        return {"name": v.name, "value": int(v.value)}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return enc_bytes(v)
    if dataclasses.is_dataclass(v):
        hints = typing.get_type_hints(type(v))
        out = {}
        for f in dataclasses.fields(v):
            x = getattr(v, f.name)
            out[f.name] = enc(x)
            if is_dataclass_union(hints[f.name]) and x is not None:
                out[f.name + "_type"] = type(x).__name__
        return out
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    return v


def header_of(data):
    eh = _get_extended_header(data)
    if eh is None:
        return None, len(data), 0
    return eh, eh.program_size, eh.segment_base_offset


def segment_bytes(data, program, base):
    return [data[base + s.offset: base + s.offset + s.size] for s in program.segments]


def delegate_blob(delegate, program, segs):
    if delegate.processed.location.name == "INLINE":
        return bytes(program.backend_delegate_data[delegate.processed.index].data)
    return segs[delegate.processed.index]


def segments_resolved(program, segs, base):
    refs = [[] for _ in segs]
    if program.constant_segment is not None and program.constant_segment.segment_index < len(segs):
        refs[program.constant_segment.segment_index].append("constant_segment")
    for plan in program.execution_plan:
        for i, d in enumerate(plan.delegates):
            if d.processed.location.name == "SEGMENT":
                refs[d.processed.index].append("delegate:%s[%d]" % (plan.name, i))
    for nd in program.named_data or []:
        refs[nd.segment_index].append("named_data:" + nd.key)
    for k, m in enumerate(program.mutable_data_segments or []):
        refs[m.segment_index].append("mutable_data_segments[%d]" % k)
    return [{"index": i, "offset": s.offset, "size": s.size, "absolute_offset": base + s.offset,
             "sha256": sha(b), "referenced_by": refs[i]}
            for i, (s, b) in enumerate(zip(program.segments, segs))]


def delegates_resolved(program, segs):
    out = {}
    for plan in program.execution_plan:
        out[plan.name] = []
        for i, d in enumerate(plan.delegates):
            blob = delegate_blob(d, program, segs)
            out[plan.name].append({
                "index": i, "id": d.id, "processed_location": d.processed.location.name,
                "processed_index": d.processed.index, "blob_len": len(blob), "blob_sha256": sha(blob),
                "compile_specs": enc(d.compile_specs)})
    return out


def len_sha(b):
    b = b if isinstance(b, (bytes, bytearray)) else b.to_bytes()
    return {"len": len(b), "sha256": sha(b)}


def binary_view(data):
    pte = deserialize_pte_binary(data)
    p = pte.program
    named = None
    if pte.named_data is not None:
        bufs = pte.named_data.buffers
        named = {k: {"buffer_index": e.buffer_index, **len_sha(bufs[e.buffer_index])}
                 for k, e in pte.named_data.pte_data.items()}
    return {
        "note": VIEW_NOTE,
        "backend_delegate_data": [len_sha(d.data) for d in p.backend_delegate_data],
        "constant_buffer": [len_sha(b.storage) for b in p.constant_buffer],
        "mutable_data": None if pte.mutable_data is None else [len_sha(b.storage) for b in pte.mutable_data],
        "named_data": named,
        "delegates_after_restore": {
            plan.name: [{"id": d.id, "location": d.processed.location.name, "index": d.processed.index}
                        for d in plan.delegates] for plan in p.execution_plan},
    }


def program_dump(data, name):
    eh, size, base = header_of(data)
    program = _flatbuffer_to_program(data[:size])
    segs = segment_bytes(data, program, base)
    return {
        "file_size": len(data),
        "file_sha256": sha(data),
        "root_table_offset": struct.unpack_from("<I", data, 0)[0],
        "file_identifier": data[4:8].decode("ascii", "replace"),
        "extended_header": None if eh is None else {
            "magic": eh.magic.decode("ascii", "replace"), "length": eh.length,
            "program_size": eh.program_size, "segment_base_offset": eh.segment_base_offset,
            "segment_data_size": eh.segment_data_size},
        "decoder": DECODER,
        "encoding_notes": ENCODING_NOTES,
        "segments_resolved": segments_resolved(program, segs, base),
        "delegates_resolved": delegates_resolved(program, segs),
        "program": enc(program),
        "deserialize_pte_binary_view": binary_view(data),
        "case": name,
    }


# ---------------------------------------------------------------- counts (NAME.meta.json)

def instruction_kinds(plan):
    kinds = collections.Counter()
    for chain in plan.chains:
        for ins in chain.instructions:
            kinds[type(ins.instr_args).__name__] += 1
    kinds.setdefault("DelegateCall", 0)
    return dict(kinds)


def plan_meta(plan, program, segs):
    blobs = [sha(delegate_blob(d, program, segs)) for d in plan.delegates]
    kinds = instruction_kinds(plan)
    return {
        "backend_delegates": len(plan.delegates),
        "delegate_calls": kinds["DelegateCall"],
        "delegate_ids": [d.id for d in plan.delegates],
        "delegate_processed_refs": ["%s:%d" % (d.processed.location.name, d.processed.index)
                                    for d in plan.delegates],
        "distinct_delegate_blobs": len(set(blobs)),
        "chains": len(plan.chains),
        "instructions": sum(len(c.instructions) for c in plan.chains),
        "instruction_kinds": kinds,
        "operators": [o.name + ("." + o.overload if o.overload else "") for o in plan.operators],
        "values": len(plan.values),
        "inputs": len(plan.inputs),
        "outputs": len(plan.outputs),
        "non_const_buffer_sizes": list(plan.non_const_buffer_sizes),
    }


def meta_doc(data, name, recipe, notes, runnable):
    eh, size, base = header_of(data)
    program = _flatbuffer_to_program(data[:size])
    segs = segment_bytes(data, program, base)
    plans = {p.name: plan_meta(p, program, segs) for p in program.execution_plan}
    blobs = {sha(delegate_blob(d, program, segs)) for p in program.execution_plan for d in p.delegates}
    return {
        "name": name, "split": "public",
        "executorch_version": et_version.__version__, "executorch_git": et_version.git_version,
        "torch_version": str(torch.__version__), "python": platform.python_version(),
        "recipe": recipe, "notes": notes,
        "file_size": len(data), "file_sha256": sha(data), "file_identifier": data[4:8].decode("ascii", "replace"),
        "has_extended_header": eh is not None, "program_size": size, "segment_base_offset": base,
        "segments_count": len(program.segments),
        "named_data_count": len(program.named_data or []),
        "backend_delegate_data_inline_count": len(program.backend_delegate_data),
        "constant_buffer_inline_count": len(program.constant_buffer),
        "constant_segment": {"segment_index": program.constant_segment.segment_index,
                             "offsets": list(program.constant_segment.offsets)},
        "mutable_data_segments_count": len(program.mutable_data_segments or []),
        "execution_plans": [p.name for p in program.execution_plan],
        "backend_delegates_total": sum(m["backend_delegates"] for m in plans.values()),
        "delegate_calls_total": sum(m["delegate_calls"] for m in plans.values()),
        "distinct_delegate_blobs_total": len(blobs),
        "plans": plans,
        "runtime_runnable": runnable,
    }


# ---------------------------------------------------------------- XNNPACK blobs

def xnn_flatbuffer(blob):
    """The XNNGraph flatbuffer of a processed XnnpackBackend blob (after its XH00 header, if any)."""
    if blob[4:8] == b"XH00":
        off, size = struct.unpack_from("<II", blob, 10)
        return blob[off: off + size]
    return blob


def xnn_nodes(blob):
    """[(node kind, fused output_min_max or None)] of an XNNPACK blob, decoded by flatc."""
    pkg = os.path.dirname(et_version.__file__)
    flatc = os.path.join(pkg, "data", "bin", "flatc")
    schema = os.path.join(pkg, "backends", "xnnpack", "serialization", "schema.fbs")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "graph.bin")
        with open(path, "wb") as f:
            f.write(xnn_flatbuffer(blob))
        subprocess.run([flatc, "--json", "--strict-json", "--raw-binary", "-o", d, schema, "--", path],
                       check=True, capture_output=True)
        with open(os.path.join(d, "graph.json")) as f:
            graph = json.load(f)
    return [(n.get("xnode_union_type"), n.get("output_min_max")) for n in graph.get("xnodes", [])]


def lowering_report(data):
    """Per plan: operators left on CPU, DelegateCalls, and the XNNPACK node kinds per delegate."""
    eh, size, base = header_of(data)
    program = _flatbuffer_to_program(data[:size])
    segs = segment_bytes(data, program, base)
    out = {}
    for plan in program.execution_plan:
        kinds = [[k + (" (+clamp %s..%s)" % (mm["output_min"], mm["output_max"]) if mm else "")
                  for k, mm in xnn_nodes(delegate_blob(d, program, segs))]
                 if d.id == "XnnpackBackend" else [] for d in plan.delegates]
        out[plan.name] = {"operators": plan_meta(plan, program, segs)["operators"],
                          "delegate_calls": instruction_kinds(plan)["DelegateCall"], "xnn_nodes": kinds}
    return out


# ---------------------------------------------------------------- runs (NAME.io.json)

def num(v):
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


def enc_value(v):
    if isinstance(v, torch.Tensor):
        t = v.detach().cpu().contiguous()
        flat = t.reshape(-1).tolist()
        values = [num(x) if isinstance(x, float) else x for x in flat]
        return {"kind": "tensor", "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                "values": values, "bytes_sha256": sha(t.reshape(-1).view(torch.uint8).numpy().tobytes())}
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "float", "value": num(v)}
    if v is None:
        return {"kind": "none"}
    raise TypeError("cannot encode %r" % type(v))


def flat_outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def eager_outputs(module, inputs):
    with torch.no_grad():
        return flat_outputs(module(*[t.clone() for t in inputs]))


def abs_diff(a, b):
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return None
    if a.numel() == 0:
        return 0.0
    a, b = a.double(), b.double()
    equal = (a == b) | (a.isnan() & b.isnan())
    return num(torch.where(equal, torch.zeros_like(a), (a - b).abs()).max().item())


def same(a, b):
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        return torch.allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True)
    return torch.equal(a, b)


def one_run(method, module, inputs):
    got = [t.clone() if isinstance(t, torch.Tensor) else t for t in method.execute([t.clone() for t in inputs])]
    eager = eager_outputs(module, inputs)
    return {
        "inputs": [enc_value(t) for t in inputs],
        "outputs": [enc_value(t) for t in got],
        "matches_eager_torch": len(got) == len(eager) and all(same(a, b) for a, b in zip(got, eager)),
        "max_abs_diff_vs_eager": [abs_diff(a, b) for a, b in zip(got, eager)],
        "eager_torch_outputs": [enc_value(t) for t in eager],
    }


def skip_reason(name, error, missing, backends):
    why = "ExecuTorch runtime could not load method %r: %r" % (name, error)
    if missing:
        why += ("; backend(s) %s not registered in this runtime (registered: %s); the C++ log says e.g. "
                "'Backend %s is not registered.'" % (missing, backends, missing[0]))
    return why


def run_method(program, name, module, input_sets, backends, missing):
    try:
        method = program.load_method(name)
    except Exception as e:  # recorded like the existing skipped methods
        return {"runs": [], "status": "skipped", "reason": skip_reason(name, e, missing, backends),
                "inputs_that_would_be_used": [[enc_value(t) for t in inp] for inp in input_sets],
                "eager_torch_outputs": [[enc_value(t) for t in eager_outputs(module, inp)] for inp in input_sets]}
    return {"runs": [one_run(method, module, inp) for inp in input_sets], "status": "ok"}


def io_doc(pte_path, case):
    from executorch.runtime import Runtime, Verification
    runtime = Runtime.get()
    backends = list(runtime.backend_registry.registered_backend_names)
    program = runtime.load_program(pte_path, verification=Verification.InternalConsistency)
    with open(pte_path, "rb") as f:
        ids = {r["id"] for plan in program_dump(f.read(), case.name)["delegates_resolved"].values() for r in plan}
    missing = sorted(ids - set(backends))
    methods = {name: run_method(program, name, module, inputs, backends, missing)
               for name, (module, inputs) in case.methods.items()}
    return {
        "runtime": "executorch.runtime.Runtime (executorch %s pip wheel, portable_lib pybindings)"
                   % et_version.__version__,
        "registered_backends": backends,
        "verification": str(Verification.InternalConsistency),
        "calls_are_sequential_on_one_loaded_method": True,
        "tensor_encoding": TENSOR_ENCODING,
        "methods": methods,
        "case": case.name,
    }


def loads_every_method(pte_path):
    """Whether ExecuTorch's runtime loads the program and every method in it."""
    from executorch.runtime import Runtime, Verification
    try:
        program = Runtime.get().load_program(pte_path, verification=Verification.InternalConsistency)
        for name in sorted(program.method_names):
            program.load_method(name)
    except Exception:
        return False
    return True


# ---------------------------------------------------------------- inputs

def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, scale=1.0):
    return (torch.randn(*shape, generator=g) * scale).float()


def uniform(g, lo, hi, *shape):
    return (lo + (hi - lo) * torch.rand(*shape, generator=g)).float()


def tiled(values, shape):
    """`values` repeated row-major to fill `shape` (float32)."""
    n = 1
    for s in shape:
        n *= s
    v = torch.tensor(values, dtype=torch.float32)
    return v.repeat(n // len(v) + 1)[:n].reshape(shape).contiguous()


def paired_weight(g, out_f, in_f):
    """Weights whose odd columns are the exact negation of the even ones: w[:, 2k+1] = -w[:, 2k]."""
    w = randn(g, out_f, in_f // 2, scale=in_f ** -0.5)
    return torch.stack([w, -w], dim=-1).reshape(out_f, in_f).contiguous()


def cancelling_pairs(g, rows, n, lo_exp, hi_exp, delta_exps):
    """x with x[..., 2k+1] = x[..., 2k] * (1 + d_k): against paired weights (w, -w) every product pair
    has opposite signs and nearly equal magnitude. Magnitudes span 2**lo_exp .. 2**hi_exp; d_k is
    +-2**-e with e drawn from delta_exps (0 in delta_exps means an exact pair, d_k = 0)."""
    half = n // 2
    mag = torch.pow(2.0, uniform(g, lo_exp, hi_exp, rows, half).double())
    sign = torch.where(torch.rand(rows, half, generator=g) < 0.5, -1.0, 1.0).double()
    a = (sign * mag).float()
    pick = torch.randint(0, len(delta_exps), (rows, half), generator=g)
    e = torch.tensor(delta_exps, dtype=torch.float64)[pick]
    d = torch.where(e == 0, 0.0, torch.pow(2.0, -e)) * torch.where(torch.rand(rows, half, generator=g) < 0.5, -1.0, 1.0)
    b = (a.double() * (1 + d)).float()
    return torch.stack([a, b], dim=-1).reshape(rows, n).contiguous()


# ---------------------------------------------------------------- modules

class Fc(torch.nn.Module):
    def __init__(self, in_f, out_f, seed):
        super().__init__()
        g = gen(seed)
        self.fc = torch.nn.Linear(in_f, out_f)
        with torch.no_grad():
            self.fc.weight.copy_(paired_weight(g, out_f, in_f))
            self.fc.bias.copy_(randn(g, out_f, scale=0.1))

    def forward(self, x):
        return self.fc(x)


class Transcendentals(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x), torch.tanh(x), torch.exp(x / 8.0), torch.sin(x * 64.0), torch.cos(x * 64.0)


class UnaryExact(torch.nn.Module):
    def forward(self, x):
        return (torch.neg(x), torch.abs(x), torch.square(x), torch.sqrt(torch.abs(x)), torch.ceil(x),
                torch.floor(x), torch.nn.functional.hardtanh(x, -1.0, 1.0))


class SoftmaxBmm(torch.nn.Module):
    def forward(self, x, y):
        return torch.softmax(x, dim=-1), torch.bmm(x, y)


# ---------------------------------------------------------------- cases

@dataclasses.dataclass
class Case:
    name: str
    recipe: str
    notes: str
    methods: dict  # method name -> (module, [input tuple per run])


def fc_inputs(in_f, seed):
    g = gen(seed)
    return [
        (randn(g, 4, in_f),),
        (cancelling_pairs(g, 4, in_f, -2, 8, [10, 14, 18, 22]),),
        (cancelling_pairs(g, 4, in_f, -6, 12, [0, 0, 0, 24]),),
    ]


def fc_case():
    return Case(
        "xnn_fc_256_cancellation",
        "to_edge_transform_and_lower({'forward': export(Linear(256,8)(x[4,256])), 'fc_1024': "
        "export(Linear(1024,4)(x[4,1024]))}, partitioner=[XnnpackPartitioner()]).to_executorch(); "
        "XNNPACK FullyConnected, weights with w[:,2k+1] = -w[:,2k]",
        "Runs per method: random normal x; then x[2k+1] = x[2k]*(1+-2^-e) so every product pair cancels "
        "(magnitudes 2^-2..2^8, e in 10..22); then pairs over 2^-6..2^12, exact except one in four moved by "
        "about one ulp (2^-24). Each exact dot product is tiny against sum |x_i w_i| (1e-4 and 1e-8 of it), "
        "so the float32 result depends on the summation order.",
        {"forward": (Fc(256, 8, 256), fc_inputs(256, 1256)),
         "fc_1024": (Fc(1024, 4, 1024), fc_inputs(1024, 2024))})


SPECIAL_T = [0.0, -0.0, 1e-8, -1e-8, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 8.0, -8.0, 9.5,
             -9.5, 15.0, -15.0, 16.5, -16.5, 17.5, -17.5, 30.0, -30.0, 88.0, -88.0, 103.0, -103.0,
             600.0, -600.0, 700.0, -700.0, 0.049087385, 0.024543693, 15.6, -15.6, 3.0e-45, -1.2e-38]


def transcendental_inputs():
    g = gen(4256)
    spread = torch.stack([torch.linspace(-12, 12, 256), torch.linspace(-16, 16, 256) + 1e-3,
                          torch.linspace(-700, 700, 256), uniform(g, -1, 1, 256)]).float().contiguous()
    return [(spread,), (tiled(SPECIAL_T, (4, 256)),), (uniform(g, -16, 16, 4, 256),)]


def transcendentals_case():
    return Case(
        "xnn_transcendentals",
        "to_edge_transform_and_lower(export(forward(x[4,256]) = (sigmoid(x), tanh(x), exp(x/8), "
        "sin(x*64), cos(x*64))), partitioner=[XnnpackPartitioner()]).to_executorch(); one XNNPACK partition",
        "Runs: rows spread over tanh/sigmoid (-12..12), sin/cos arguments (-1024..1024), exp(x/8) over "
        "-87.5..87.5 (down to subnormal results, finite); hand-picked values (signed zero, saturation, "
        "|x|=600..700, subnormals); uniform -16..16. All outputs finite.",
        {"forward": (Transcendentals(), transcendental_inputs())})


SPECIAL_U = [0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.1754942e-38, -1.1754942e-38, 1.1754944e-38,
             0.3, -0.3, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.99999994, -0.99999994, 1.0, -1.0,
             1.0000001, -1.0000001, 8388607.5, -8388607.5, 8388609.0, -8388609.0, 1e19, -1e19,
             1.8e19, -1.8e19, 2.0, -7.0, 1e-20, -1e-20, 4e-23, 123.456, -123.456, 3.4e-3, -65504.0]


def unary_inputs():
    g = gen(5064)
    specials = tiled(SPECIAL_U, (4, 64))
    return [(specials,), (randn(g, 4, 64, scale=3.0),), ((-specials).flip(-1).contiguous(),)]


def unary_case():
    return Case(
        "xnn_unary_exact",
        "to_edge_transform_and_lower(export(forward(x[4,64]) = (neg(x), abs(x), square(x), sqrt(abs(x)), "
        "ceil(x), floor(x), hardtanh(x,-1,1))), partitioner=[XnnpackPartitioner()]).to_executorch()",
        "Exactly rounded ops. Inputs include signed zeros, subnormals (1e-45, 1e-40), the normal/subnormal "
        "boundary, halves, values next to +-1 and 2^23, and |x| up to 1.8e19 (square stays finite). "
        "square is torch.square (pow.Tensor_Scalar 2, XNNSquare); x*x would lower to XNNMultiply instead.",
        {"forward": (UnaryExact(), unary_inputs())})


def softmax_bmm_inputs():
    g = gen(6064)
    plain = (randn(g, 2, 8, 64), randn(g, 2, 64, 16))
    yw = torch.stack([paired_weight(g, 16, 64).t()[0::2] for _ in range(2)])  # [2, 32, 16]
    y = torch.stack([yw, -yw], dim=2).reshape(2, 64, 16).contiguous()  # rows 2k+1 = -rows 2k
    x1 = cancelling_pairs(g, 16, 64, -2, 6, [10, 14, 18, 22]).reshape(2, 8, 64)
    x2 = cancelling_pairs(g, 16, 64, -4, 9, [0, 0, 24]).reshape(2, 8, 64)
    return [plain, (x1, y), (x2, (y * 3).contiguous())]


def softmax_bmm_case():
    return Case(
        "xnn_softmax_bmm",
        "to_edge_transform_and_lower(export(forward(x[2,8,64], y[2,64,16]) = (softmax(x, -1), bmm(x, y))), "
        "partitioner=[XnnpackPartitioner()]).to_executorch(); XNNPACK Softmax and BatchMatrixMultiply",
        "Runs: random normal; then y rows 2k+1 = -rows 2k and x[2k+1] = x[2k]*(1+-2^-e) so the bmm dot "
        "products cancel (magnitudes up to 2^6, e in 10..22); then pairs up to 2^9, exact except one in three "
        "moved by about one ulp, and y*3. The large x also drive softmax to saturation and underflow.",
        {"forward": (SoftmaxBmm(), softmax_bmm_inputs())})


CASES = {"xnn_fc_256_cancellation": fc_case, "xnn_transcendentals": transcendentals_case,
         "xnn_unary_exact": unary_case, "xnn_softmax_bmm": softmax_bmm_case}


# ---------------------------------------------------------------- export and write

def export_case(case):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    eps = {name: torch.export.export(m.eval(), inputs[0]) for name, (m, inputs) in case.methods.items()}
    edge = to_edge_transform_and_lower(eps, partitioner=[XnnpackPartitioner()])
    return bytes(edge.to_executorch().buffer)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def make(case, out):
    data = export_case(case)
    pte = os.path.join(out, case.name + ".pte")
    with open(pte, "wb") as f:
        f.write(data)
    write_json(os.path.join(out, case.name + ".json"), program_dump(data, case.name))
    io = io_doc(pte, case)
    write_json(os.path.join(out, case.name + ".io.json"), io)
    runnable = all(m["status"] == "ok" for m in io["methods"].values())
    lowered = lowering_report(data)
    notes = case.notes + " XNNPACK nodes: " + "; ".join(
        "%s delegate %d: %s" % (plan, i, ", ".join(kinds))
        for plan, r in lowered.items() for i, kinds in enumerate(r["xnn_nodes"])) + "."
    write_json(os.path.join(out, case.name + ".meta.json"), meta_doc(data, case.name, case.recipe, notes, runnable))
    summarize(case, data, io, lowered)


def summarize(case, data, io, lowered):
    print("== %s: %d bytes" % (case.name, len(data)))
    for plan, r in lowered.items():
        print("  %s: DelegateCalls %d, CPU operators %s" % (plan, r["delegate_calls"], r["operators"] or "none"))
        for i, kinds in enumerate(r["xnn_nodes"]):
            print("    delegate %d XNNPACK nodes: %s" % (i, ", ".join(kinds)))
    for plan, m in io["methods"].items():
        module, input_sets = case.methods[plan]
        for k, run in enumerate(m["runs"]):
            print("  %s run %d: matches_eager_torch %s, max_abs_diff_vs_eager %s"
                  % (plan, k, run["matches_eager_torch"], run["max_abs_diff_vs_eager"]))
            print("    " + "; ".join(reference_gaps(module, input_sets[k], run)))


def reference_gaps(module, inputs, run):
    """Per output: elements whose bits differ (ExecuTorch vs eager), and each one's largest gap to
    the float64 evaluation of the same module rounded to float32 (console only)."""
    ref = eager_outputs(copy.deepcopy(module).double(), [t.double() for t in inputs])
    out = []
    for i, (r, o, e) in enumerate(zip(ref, run["outputs"], run["eager_torch_outputs"])):
        got, eager, ref32 = decode(o), decode(e), r.float()
        if got.dtype != torch.float32:
            continue
        nbits = int((got.view(torch.int32) != eager.view(torch.int32)).sum())
        out.append("out %d: %d bits differ, vs f64: ET %.3g eager %.3g"
                   % (i, nbits, abs_diff(got, ref32), abs_diff(eager, ref32)))
    return out


def decode(e):
    values = [float(v) if isinstance(v, str) else v for v in e["values"]]
    return torch.tensor(values, dtype=getattr(torch, e["dtype"])).reshape(e["shape"])


def redump(path, out):
    name = os.path.basename(path)[: -len(".pte")]
    with open(path, "rb") as f:
        data = f.read()
    write_json(os.path.join(out, name + ".json"), program_dump(data, name))
    print("wrote", os.path.join(out, name + ".json"))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Make the XNNPACK numerics cases of corpus/real, or redump "
                                             "NAME.json of existing .pte files.")
    ap.add_argument("--out", default=HERE, help="output folder (default: this script's folder)")
    ap.add_argument("--only", nargs="+", choices=sorted(CASES), metavar="NAME", help="make only these cases")
    ap.add_argument("--redump", nargs="+", metavar="FILE.pte", help="write only NAME.json of each file")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.redump:
        for path in args.redump:
            redump(path, args.out)
        return 0
    for name in args.only or list(CASES):
        make(CASES[name](), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
