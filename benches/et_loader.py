"""ExecuTorch's loaders on the files named on the command line, for `cargo bench --bench load`.

Prints one JSON object: per file, the median microseconds of one call of
  - `cpp`: ExecuTorch's C++ `Program::load` with InternalConsistency verification, through the
    pip pybindings (`_load_program_from_buffer`),
  - `cpp_minimal`: the same call with Minimal verification (the difference is what the
    InternalConsistency verifier costs; the rest is the load, the call through pybind11 and the
    `ExecuTorchProgram` it builds), and
  - `python`: its Python reader (`exir._serialize._deserialize_pte_binary`);
and under "pybind_call", the median microseconds of a call through the pybindings that does
next to nothing (`_threadpool_get_thread_count`): what any call through them costs.
Run by the Rust bench with the Python named by PTECHECK_ET_PYTHON (issue I's runner venv).
"""

import json
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def median_us(fn, iters, rounds=9):
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t) / iters * 1e6)
    samples.sort()
    return samples[len(samples) // 2]


def main(paths):
    from executorch.extension.pybindings import portable_lib as et
    from executorch.exir._serialize import _deserialize_pte_binary

    verification = et.Verification.InternalConsistency
    out = {"pybind_call": median_us(et._threadpool_get_thread_count, 20000)}
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        entry = {}
        for name, fn, iters, rounds in [
            ("cpp", lambda: et._load_program_from_buffer(data, program_verification=verification), 2000, 9),
            (
                "cpp_minimal",
                lambda: et._load_program_from_buffer(data, program_verification=et.Verification.Minimal),
                2000,
                9,
            ),
            ("python", lambda: _deserialize_pte_binary(data), 20, 5),
        ]:
            try:
                fn()
            except Exception as e:  # a file this loader rejects: reported, not timed
                entry[name + "_error"] = str(e)
                continue
            entry[name] = median_us(fn, iters, rounds)
        out[path] = entry
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
