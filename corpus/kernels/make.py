"""Makes corpus/kernels: small programs ExecuTorch 1.5.1's pipeline emits with the copy kernels
it inserts (dim_order_ops::_clone_dim_order.out, dim_order_ops::_to_dim_order_copy.out) and
view_copy.out, each with a recording in the corpus encoding (`NAME.io.json`: the torch eager
outputs of every run, and ExecuTorch's own outputs when its runtime runs it).

Run from the repository root with the ExecuTorch venv (torch and executorch only):
    VENV/bin/python corpus/kernels/make.py
"""
import hashlib
import json
import os
import struct
import sys

import torch
from executorch.exir import to_edge
from executorch.extension.pybindings import portable_lib as et

HERE = os.path.dirname(os.path.abspath(__file__))


class Clone(torch.nn.Module):
    def forward(self, x):
        return (x * 2).clone() + 1


class ToInt(torch.nn.Module):
    def forward(self, x):
        return (x * 3).to(torch.int64)


class ToBool(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.bool)


class ToFloat(torch.nn.Module):
    def forward(self, x):
        return (x > 0).to(torch.float32) + x


class ViewOut(torch.nn.Module):
    def forward(self, x):
        return (x + 1).view(-1)


class ConstantOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.tensor([[1.5, -2.0, 0.25]]))

    def forward(self, x):
        return x + 1, self.c


CASES = {
    "clone_dim_order": (Clone(), [torch.tensor([[1.0, -2.5, 3.0], [0.0, -0.0, 7.25]])]),
    "to_int64": (ToInt(), [torch.tensor([[1.25, -2.5, 3.9], [0.0, -0.7, 7.0]])]),
    "to_bool": (ToBool(), [torch.tensor([[1.25, 0.0, -0.0], [0.0, -0.7, float("nan")]])]),
    "bool_to_float": (ToFloat(), [torch.tensor([[1.25, 0.0, -3.0], [2.0, -0.7, 5.0]])]),
    "view_copy_output": (ViewOut(), [torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])]),
    "constant_output": (ConstantOut(), [torch.tensor([[1.0, 2.0, 3.0]])]),
}

DTYPES = {torch.float32: ("float32", "<f"), torch.int64: ("int64", "<q"), torch.bool: ("bool", "<?")}


def encode(t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(type(t))
    name, fmt = DTYPES[t.dtype]
    flat = t.contiguous().reshape(-1).tolist()
    data = b"".join(struct.pack(fmt, v) for v in flat)

    def value(v):
        if isinstance(v, bool):
            return v
        if isinstance(v, float):
            if v != v:
                return "NaN"
            if v in (float("inf"), float("-inf")):
                return "inf" if v > 0 else "-inf"
        return v
    out = {"kind": "tensor", "dtype": name, "shape": list(t.shape), "values": [value(v) for v in flat]}
    if not (t.dtype == torch.float32 and any(v != v for v in flat)):
        out["bytes_sha256"] = hashlib.sha256(data).hexdigest()
    return out


def main():
    for name, (module, inputs) in CASES.items():
        module.eval()
        with torch.no_grad():
            eager = module(*inputs)
        eager = list(eager) if isinstance(eager, tuple) else [eager]
        program = to_edge(torch.export.export(module, tuple(inputs))).to_executorch()
        pte = os.path.join(HERE, name + ".pte")
        with open(pte, "wb") as f:
            f.write(program.buffer)
        method = et._load_program(pte).load_method("forward")
        method.set_inputs(list(inputs))
        method.execute()
        ran = list(method.get_outputs(True))
        kernels = sorted({"%s.%s" % (o.name, o.overload) for o in program.executorch_program.execution_plan[0].operators})
        doc = {
            "made_by": "corpus/kernels/make.py (executorch %s, torch %s)" % (et.__name__ and _version(), torch.__version__),
            "kernels": kernels,
            "methods": {
                "forward": {
                    "runs": [{"inputs": [encode(t) for t in inputs], "outputs": [encode(t) for t in ran]}],
                    "eager_torch_outputs": [[encode(t) for t in eager]],
                }
            },
        }
        with open(os.path.join(HERE, name + ".io.json"), "w") as f:
            json.dump(doc, f, indent=1)
        same = all(torch.equal(a, b) or (a.dtype.is_floating_point and torch.allclose(a, b, equal_nan=True)) for a, b in zip(eager, ran))
        print("%-18s %s  kernels %s  executorch = eager: %s" % (name, pte, kernels, same))


def _version():
    from importlib.metadata import version
    return version("executorch")


if __name__ == "__main__":
    sys.exit(main())
