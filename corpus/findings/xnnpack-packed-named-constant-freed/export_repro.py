#!/usr/bin/env python3
"""ExecuTorch's own exporter produces the packed-named-constant layout, and it crashes.

Standalone (torch and executorch only). The module is `linear(x) + linear.bias`: one
parameter is both the bias of the linear and an operand of the add. It is exported with
ExecuTorch's pipeline (torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) ->
to_executorch): one XNNPACK partition in which a single XNNPACK value (one named-data key)
is the FullyConnected bias and input2 of the Add. The .pte is saved to a temporary file and
run in child processes, from the file path (_load_program) and from a buffer
(_load_program_from_buffer); one verdict line is printed.
"""
import os
import signal
import subprocess
import sys
import tempfile

import torch


class LinearPlusBias(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) + self.lin.bias


def model_and_inputs():
    torch.manual_seed(0)
    return LinearPlusBias().eval(), (torch.randn(2, 4),)


def export(path):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model, inputs = model_and_inputs()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    gm = edge.exported_program().graph_module
    delegated = gm.lowered_module_0.original_module.graph_module.code.strip()
    print("graph inside the one XNNPACK delegate (p_lin_bias feeds both the linear and the add):")
    print("    " + delegated.replace("\n", "\n    "))
    with open(path, "wb") as f:
        f.write(edge.to_executorch().buffer)


def child(mode, path):
    from executorch.extension.pybindings import portable_lib as et

    model, inputs = model_and_inputs()
    if mode == "--from-file":
        program = et._load_program(path)
    else:
        with open(path, "rb") as f:
            program = et._load_program_from_buffer(f.read())
    method = program.load_method("forward")
    method.set_inputs(list(inputs))
    method.execute()
    got = method.get_outputs(True)[0]
    ok = torch.allclose(got, model(*inputs), rtol=1e-5, atol=1e-5)
    print("MATCH" if ok else "MISMATCH", flush=True)
    return 0 if ok else 1


def describe(rc):
    if rc < 0:
        try:
            return "CRASH: %s (%d)" % (signal.Signals(-rc).name, rc)
        except ValueError:
            return "CRASH: signal %d" % -rc
    return "exit status %d (%s)" % (rc, "outputs match eager" if rc == 0 else "wrong outputs")


def main():
    if len(sys.argv) == 3:
        return child(sys.argv[1], sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "linear_plus_bias.pte")
        export(path)
        print("saved %s (%d bytes)" % (path, os.path.getsize(path)))
        rc = {}
        for mode in ("--from-buffer", "--from-file"):
            p = subprocess.run([sys.executable, os.path.abspath(__file__), mode, path],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            rc[mode] = p.returncode
            print("=== %s: %s" % (mode, describe(p.returncode)))
    if rc["--from-buffer"] == 0 and rc["--from-file"] < 0:
        print("VERDICT: BUG REPRODUCED with ExecuTorch's own exporter: from a buffer the outputs "
              "match eager; from a file path: %s" % describe(rc["--from-file"]))
        return 0
    print("VERDICT: NOT REPRODUCED: from buffer: %s; from file: %s"
          % (describe(rc["--from-buffer"]), describe(rc["--from-file"])))
    return 1


if __name__ == "__main__":
    sys.exit(main())
