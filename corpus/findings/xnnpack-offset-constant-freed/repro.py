#!/usr/bin/env python3
"""ExecuTorch 1.5.1: XNNPACK use-after-free when a .pte is loaded from a file path.

Standalone (needs only torch and executorch). Loads ./shared.pte twice, each in its own
child process so that a crash cannot take this script down:

  --from-buffer  _load_program_from_buffer(bytes)  -> expected: runs, outputs match io.json
  --from-file    _load_program(path)               -> observed: SIGSEGV in execute()

then prints one verdict line. Run a mode directly (e.g. under gdb) with
`python repro.py --from-file`.
"""
import json
import math
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PTE = os.path.join(HERE, "shared.pte")
IO = os.path.join(HERE, "io.json")
METHOD = "forward"  # the method that crashes


def child(mode):
    import torch
    from executorch.extension.pybindings import portable_lib as et

    dtypes = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
              "int32": torch.int32, "bool": torch.bool}

    def num(x):  # io.json writes non-finite floats as "NaN", "inf", "-inf"
        return float(x) if isinstance(x, str) else x

    def tensor(v):
        assert v["kind"] == "tensor", v["kind"]
        return torch.tensor([num(x) for x in v["values"]],
                            dtype=dtypes[v["dtype"]]).reshape(v["shape"])

    def same(got, want, tol):
        got = got.reshape(-1).tolist()
        want = [num(x) for x in want["values"]]
        if len(got) != len(want):
            return False
        for i, (g, w) in enumerate(zip(got, want)):
            if isinstance(w, float) and math.isnan(w):
                if not math.isnan(g):
                    return False
            elif "abs" in tol:
                if not abs(g - w) <= tol["abs"][i]:
                    return False
            elif g != w or (isinstance(w, float) and math.copysign(1, g) != math.copysign(1, w)):
                return False
        return True

    run = json.load(open(IO))["methods"][METHOD]["runs"][0]
    if mode == "--from-file":
        print("loading with _load_program(%r)" % PTE, flush=True)
        program = et._load_program(PTE, program_verification=et.Verification.InternalConsistency)
    else:
        print("loading with _load_program_from_buffer(<%d bytes>)" % os.path.getsize(PTE), flush=True)
        with open(PTE, "rb") as f:
            data = f.read()
        program = et._load_program_from_buffer(
            data, program_verification=et.Verification.InternalConsistency)
    method = program.load_method(METHOD)
    method.set_inputs([tensor(v) for v in run["inputs"]])
    print("executing %s ..." % METHOD, flush=True)
    method.execute()
    outs = method.get_outputs(True)
    ok = len(outs) == len(run["outputs"]) and all(
        same(o, w, t) for o, w, t in zip(outs, run["outputs"], run["tolerance"]))
    for i, o in enumerate(outs):
        print("output %d: %s" % (i, o.reshape(-1).tolist()))
    print("expected: %s" % [w["values"] for w in run["outputs"]])
    print("MATCH" if ok else "MISMATCH", flush=True)
    return 0 if ok else 1


def describe(rc):
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "signal %d" % -rc
        return "CRASH: %s (%d)" % (name, rc)
    return "exit status %d (%s)" % (rc, "outputs match io.json" if rc == 0 else "wrong outputs")


def main():
    if len(sys.argv) > 1:
        return child(sys.argv[1])
    results = {}
    for mode in ("--from-buffer", "--from-file"):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), mode],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        results[mode] = p.returncode
        print("=== %s: %s" % (mode, describe(p.returncode)))
        print("\n".join("    " + l for l in p.stdout.splitlines()))
    buf, fil = results["--from-buffer"], results["--from-file"]
    if buf == 0 and fil < 0:
        print("VERDICT: BUG REPRODUCED: %s from a buffer matches io.json; from a file path: %s"
              % (METHOD, describe(fil)))
        return 0
    if buf == 0 and fil == 0:
        print("VERDICT: NOT REPRODUCED: %s runs and matches both from a buffer and from a file"
              % METHOD)
        return 1
    print("VERDICT: UNEXPECTED: from buffer: %s; from file: %s" % (describe(buf), describe(fil)))
    return 2


if __name__ == "__main__":
    sys.exit(main())
