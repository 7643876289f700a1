#!/usr/bin/env python3
"""Records how the ExecuTorch pip package ends on each .pte file given: one line per file,
`NAME<TAB>STAGE<TAB>ERROR` (STAGE = load_program, load_method, set_inputs or execute; ERROR =
the code's name), `NAME<TAB>ran` or `NAME<TAB>crashed<TAB>signal N`.

Each file runs in a child process of its own (ExecuTorch aborts on some inputs) through the same
pybindings calls as runners/executorch_runner.py: `_load_program_from_buffer` with
InternalConsistency verification, `load_method("forward")`, `set_inputs` with zeros of each
input's declared shape and dtype, `execute`. The output is what tests/fuzz_regressions.rs
compares the reference runtime with:

  VENV/bin/python runners/record_outcomes.py corpus/load_pte/regressions/*.pte \\
      > corpus/regressions-on-executorch-1.5.1.tsv
"""

import os
import re
import subprocess
import sys

# executorch/runtime/core/error.h (1.5.1)
NAMES = {
    0x01: "Internal", 0x02: "InvalidState", 0x03: "EndOfMethod", 0x04: "AlreadyLoaded",
    0x10: "NotSupported", 0x11: "NotImplemented", 0x12: "InvalidArgument", 0x13: "InvalidType",
    0x14: "OperatorMissing", 0x20: "NotFound", 0x21: "MemoryAllocationFailed",
    0x22: "AccessFailed", 0x23: "InvalidProgram", 0x24: "InvalidExternalData",
    0x25: "OutOfResources", 0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed", 0x32: "DelegateInvalidHandle",
}
CODE = re.compile(r"0x:?([0-9a-fA-F]+)\s*$")


def one(path):
    """Runs one file in this process and prints its outcome."""
    import torch
    from executorch.extension.pybindings import portable_lib as et

    def end(stage, exc):
        m = CODE.search(str(exc))
        name = NAMES.get(int(m.group(1), 16), "0x" + m.group(1)) if m else type(exc).__name__
        print("%s\t%s" % (stage, name))

    data = open(path, "rb").read()
    try:
        program = et._load_program_from_buffer(data, program_verification=et.Verification.InternalConsistency)
    except Exception as e:  # noqa: BLE001
        return end("load_program", e)
    dtypes = {6: torch.float32, 7: torch.float64, 4: torch.int64, 3: torch.int32, 11: torch.bool}
    try:
        meta = program.method_meta("forward")
        inputs = []
        for i in range(meta.num_inputs()):
            t = meta.input_tensor_meta(i)
            inputs.append(torch.zeros(list(t.sizes()), dtype=dtypes.get(int(t.dtype()), torch.float32)))
        method = program.load_method("forward")
    except Exception as e:  # noqa: BLE001
        return end("load_method", e)
    try:
        method.set_inputs(inputs)
    except Exception as e:  # noqa: BLE001
        return end("set_inputs", e)
    try:
        method.execute()
    except Exception as e:  # noqa: BLE001
        return end("execute", e)
    print("ran")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        # Only the outcome goes to the real stdout; native code's prints go to stderr.
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = out
        one(sys.argv[2])
        out.flush()
        return
    for path in sys.argv[1:]:
        p = subprocess.run([sys.executable, __file__, "--one", path], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        name = os.path.basename(path)
        if p.returncode < 0:
            print("%s\tcrashed\tsignal %d" % (name, -p.returncode))
        else:
            print("%s\t%s" % (name, p.stdout.strip() or "no outcome (exit %d)" % p.returncode))


if __name__ == "__main__":
    main()
