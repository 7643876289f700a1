
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
    if len(eager) != len(ran):
        wrong.append("method %s: %s gives %d outputs, torch's eager run %d" % (name, label, len(ran), len(eager)))
    for i, (want_o, got_o) in enumerate(zip(eager, ran)):
        same = _same(want_o, got_o)
        show = lambda o, w: _json.dumps(encode_value(o, w)["values"] if hasattr(o, "shape") else encode_value(o, w))
        print("  output %d: torch eager %s" % (i, show(want_o, "eager")))
        print("            %-11s %s%s" % (label, show(got_o, "ran"), "" if same else "   <-- differs"))
        if not same:
            wrong.append("method %s: output %d of %s differs from torch's eager output" % (name, i, label))


def _same(a, b):
    """Equal as a reader compares outputs from two frameworks: NaN equals NaN, the sign of a zero
    is not compared, floats within 1e-5 relative (a flat allowance; ptecheck's own verdict, with
    its tolerance model, is in the folder's failures.txt)."""
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
