#!/usr/bin/env python3
"""ptecheck exporter for ExecuTorch's own pipeline (docs/exporter-protocol.md, version 1).

Turns a ptecheck saved program (program.json) into a .pte with the `executorch` pip package
(tested with 1.5.1 and torch 2.14.1): the program is rebuilt as torch modules
(runners/exir_build.py), each lowered module is exported and lowered with
`to_backend(backend_id, edge_program, compile_specs)`, each method is exported with
`torch.export.export` (non-strict, then strict when that fails), and the methods go through
`to_edge` and `to_executorch` to the serialised bytes.

Protocol mode (no arguments): writes one hello line, then answers JSON Lines requests
`{"id", "op": "export", "program", "inputs"}` from stdin with one reply line each on stdout, in
order. stdout carries protocol lines only (the real stdout is moved to a private descriptor
before torch is imported); diagnostics go to stderr.

Reproducer mode: `executorch_exporter.py --script PROGRAM.json [--inputs INPUTS.json] > repro.py`
writes a standalone Python script (torch and executorch only; exir_build.py and the program are
pasted into it) that rebuilds the program, runs the same pipeline and prints what it emitted.
INPUTS.json: `{"METHOD": [values]}`, `{"inputs": {...}}`, an io.json (first run of each method),
or a list (the inputs of the only method). Without it the script makes up inputs.

Run:  VENV/bin/python runners/executorch_exporter.py
Settings: PTECHECK_EXIR_STRICT=auto|0|1 (export mode; auto = non-strict, then strict),
PTECHECK_EXIR_EXTRA_BACKENDS=1 (also lower `scratch` and `multifn` modules by pass-through; not
announced).
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
MAX_LINE = 64 * 1024 * 1024


def _script_mode(argv):
    """`--script PROGRAM.json [--inputs INPUTS.json]`: the reproducer on stdout (no torch)."""
    import json
    prog_path = None
    inputs_path = None
    out_path = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--script" and i + 1 < len(argv):
            prog_path = argv[i + 1]
            i += 2
        elif a == "--inputs" and i + 1 < len(argv):
            inputs_path = argv[i + 1]
            i += 2
        elif a in ("-o", "--output") and i + 1 < len(argv):
            out_path = argv[i + 1]
            i += 2
        else:
            sys.stderr.write("usage: executorch_exporter.py --script PROGRAM.json [--inputs INPUTS.json] [-o repro.py]\n")
            return 2
    try:
        with open(prog_path, encoding="utf-8") as f:
            program_text = f.read()
        doc = json.loads(program_text)
        if not isinstance(doc, dict) or "program" not in doc:
            raise ValueError("not a saved program (no `program` member)")
        inputs_doc = None
        if inputs_path is not None:
            with open(inputs_path, encoding="utf-8") as f:
                inputs_doc = normalise_inputs(json.load(f), doc)
        with open(os.path.join(_HERE, "exir_build.py"), encoding="utf-8") as f:
            builder = f.read()
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("executorch_exporter: %s: %s\n" % (type(e).__name__, e))
        return 1
    text = make_script(builder, json.dumps(doc, separators=(",", ":")),
                       None if inputs_doc is None else json.dumps(inputs_doc, separators=(",", ":")),
                       os.path.basename(prog_path))
    if out_path:
        with open(out_path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def normalise_inputs(doc, program_doc):
    """INPUTS.json in any of its accepted forms as {method: [values]}."""
    names = [m.get("name") for m in program_doc["program"].get("methods", [])]
    if isinstance(doc, list):
        if len(names) != 1:
            raise ValueError("a list of inputs needs a program of one method")
        return {names[0]: doc}
    if not isinstance(doc, dict):
        raise ValueError("inputs must be an object or a list")
    if "methods" in doc and isinstance(doc["methods"], dict):  # io.json
        out = {}
        for name, m in doc["methods"].items():
            runs = m.get("runs") or []
            if runs:
                out[name] = runs[0]["inputs"]
        return out
    if "inputs" in doc:
        inner = doc["inputs"]
        return {names[0]: inner} if isinstance(inner, list) and len(names) == 1 else inner
    return doc


def make_script(builder_source, program_json, inputs_json, program_name, expected_json=None):
    head = ('#!/usr/bin/env python3\n'
            '# Reproducer written by ptecheck runners/executorch_exporter.py --script %s.\n'
            '# Needs only torch and executorch (tested: executorch 1.5.1, torch 2.14.1).\n'
            '# Run: python THIS.py [OUT.pte]  (prints what ExecuTorch emitted; writes the .pte when\n'
            '# given a path).\n'
            '# The builder below is runners/exir_build.py, verbatim.\n' % program_name)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "repro_main.py"), encoding="utf-8") as f:
        main = f.read()
    tail = ("\nPROGRAM_JSON = %r\nINPUTS_JSON = %r\nEXPECTED_JSON = %r\n" % (program_json, inputs_json, expected_json)) + main
    return head + builder_source + tail


if __name__ == "__main__" and "--script" in sys.argv[1:]:
    sys.exit(_script_mode(sys.argv[1:]))

# --- Protocol mode: keep the protocol stream clean ----------------------------------------------
_PROTO_FD = os.dup(1)
os.dup2(2, 1)
sys.stdout = sys.stderr
_OUT = os.fdopen(_PROTO_FD, "w", encoding="utf-8", newline="\n")

import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import protocol_json  # noqa: E402  (beside this script: its folder is on sys.path)

PROTOCOL = 1
NAME = "executorch-exir"
STAGES = ("build", "export", "lower", "emit", "eager")

# What works through ExecuTorch 1.5.1's pipeline (measured; runners/README.md says what is announced and why).
# while_loop is refused by the emitter ("Unsupported control flow operator: while_loop").
CONTROL_FLOW = ["cond", "map", "scan"]
OPERATORS = ["add", "sub", "mul", "div", "relu", "sin", "cos", "linear", "addmm", "mm",
             "permute_copy", "cumsum", "select_copy", "index_select", "argmax", "gt", "gt_tensor",
             "view", "sym_size", "scalar_add", "scalar_sub", "scalar_mul", "scalar_floordiv",
             "scalar_eq", "scalar_lt", "scalar_gt", "scalar_ge", "scalar_le"]


def log(msg):
    try:
        sys.stderr.write("executorch_exporter: %s\n" % msg)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


def write_line(obj):
    _OUT.write(json.dumps(obj, separators=(",", ":"), allow_nan=False))
    _OUT.write("\n")
    _OUT.flush()


_t0 = time.perf_counter()
warnings.filterwarnings("ignore")
try:
    import torch  # noqa: E402
    import exir_build as B  # noqa: E402  (imports executorch)
except BaseException as e:  # noqa: BLE001
    log("cannot import torch/executorch: %s: %s" % (type(e).__name__, e))
    sys.exit(1)
IMPORT_SECONDS = time.perf_counter() - _t0


def _version(dist, fallback):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:  # noqa: BLE001
        return fallback


def hello():
    backends = B.register_backends()
    override = os.environ.get("PTECHECK_EXIR_BACKENDS")
    if override is not None:
        backends = [b for b in (s.strip() for s in override.split(",")) if b]
    return {"hello": {
        "protocol": PROTOCOL, "role": "exporter", "name": NAME,
        "executorch": _version("executorch", "unknown"),
        "torch": torch.__version__.split("+")[0],
        "rules": {"sharing": "none", "sharing_scope": "body", "scratch": False, "blob_dedup": "bytes"},
        "control_flow": list(CONTROL_FLOW),
        "backends": backends,
        "multimethod": [],
        "operators": list(OPERATORS),
        "dynamic_shapes": True,
    }}


WARMUP_PROGRAM = {"schema_version": [5, 6], "program": {
    "methods": [{"name": "forward", "graph": {
        "inputs": [{"tensor": {"dtype": "f32", "shape": [2, 2]}}],
        "nodes": [{"node": "call", "module": 0, "args": [0]}, {"node": "call", "module": 1, "args": [1]}],
        "outputs": [2]}}],
    "modules": [
        {"backend": "XnnpackBackend", "processed": "", "graph": {
            "inputs": [{"tensor": {"dtype": "f32", "shape": [2, 2]}}],
            "nodes": [{"node": "op", "op": {"op": "add"}, "args": [0, 0]}], "outputs": [1]}},
        {"backend": "demo", "processed": "00", "graph": {
            "inputs": [{"tensor": {"dtype": "f32", "shape": [2, 2]}}],
            "nodes": [{"node": "op", "op": {"op": "relu"}, "args": [0]}], "outputs": [1]}}]}}


def warm_up():
    """One small export before the hello: the first XNNPACK lowering imports and initialises
    several seconds' worth of code, which would otherwise land on the first request."""
    if os.environ.get("PTECHECK_EXIR_WARMUP", "1") == "0":
        return
    t = time.perf_counter()
    try:
        program = B.read_program(WARMUP_PROGRAM)
        B.export_program(program, {"forward": [torch.zeros(2, 2)]})
        log("warm-up export took %.1f s" % (time.perf_counter() - t))
    except Exception as e:  # noqa: BLE001
        log("warm-up export failed (ignored): %s" % B.describe_exception(e))
    finally:
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass


def request_error(rid, msg):
    return {"id": rid, "stage": "request", "error": "request failed: %s" % msg}


def export(rid, req):
    try:
        program = B.read_program(req.get("program"))
    except B.ProgramError as e:
        return request_error(rid, "not a saved program: %s" % e)
    raw = req.get("inputs")
    if not isinstance(raw, dict):
        return request_error(rid, "inputs must be an object of method name -> list of values")
    try:
        inputs = {}
        for name, vals in raw.items():
            if not isinstance(vals, list):
                raise B.ValueError_("inputs.%s is not a list" % name)
            inputs[name] = [B.decode_value(v, "inputs.%s[%d]" % (name, i)) for i, v in enumerate(vals)]
        B.check_inputs(program, inputs)
    except B.ValueError_ as e:
        return request_error(rid, str(e))
    try:
        res = B.export_program(program, inputs)
    except B.StageError as e:
        log("request %s: %s failed:\n%s" % (rid, e.stage, _trace(e.exc)))
        return {"id": rid, "stage": e.stage, "error": B.describe_exception(e.exc)}
    info = res["info"]
    log("request %s: ok; methods exported %s; modules exported %s" % (
        rid,
        ", ".join("%s %s" % (n, "strict" if m["strict"] else "non-strict") for n, m in info["methods"].items()),
        ", ".join("%d %s" % (i, "strict" if m["strict"] else "non-strict") for i, m in sorted(info["modules"].items())) or "-"))
    for n, m in info["methods"].items():
        if m.get("non_strict_error"):
            log("request %s: method %s: non-strict export failed: %s" % (rid, n, m["non_strict_error"]))
    try:
        eager = {name: [B.encode_value(o, "eager.%s[%d]" % (name, i)) for i, o in enumerate(outs)]
                 for name, outs in res["eager"].items()}
    except Exception as e:  # noqa: BLE001
        return {"id": rid, "stage": "eager", "error": B.describe_exception(e)}
    return {"id": rid, "pte": B.b64(res["pte"]), "ptd": B.b64(res["ptd"]), "eager": eager,
            "delegates": res["delegates"],
            "seconds": {k: round(v, 6) for k, v in res["seconds"].items()}}


def _trace(exc):
    import traceback
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]


def handle_line(line):
    try:
        req = protocol_json.loads(line)
    except Exception as e:  # noqa: BLE001
        return request_error(None, "not JSON: %s" % e)
    if not isinstance(req, dict):
        return request_error(None, "not a JSON object")
    rid = req.get("id")
    if rid.__class__ is not int or rid < 0:
        return request_error(None, "bad or missing id %r" % (rid,))
    op = req.get("op")
    if op is not None and op != "export":
        return request_error(rid, "unsupported op %r" % (op,))
    try:
        return export(rid, req)
    except Exception as e:  # noqa: BLE001  (a fault of this script, answered, not fatal)
        log("request %s: internal error:\n%s" % (rid, _trace(e)))
        return request_error(rid, "internal: %s" % B.describe_exception(e))
    finally:
        try:
            torch._dynamo.reset()  # strict export compiles forward again for every program
        except Exception:  # noqa: BLE001
            pass


def read_line(stream):
    """The next line (bytes) at most MAX_LINE long; a longer one is read and dropped and given
    back as None. b"" at end of input."""
    line = stream.readline(MAX_LINE + 1)
    if len(line) <= MAX_LINE or line.endswith(b"\n") and len(line) == MAX_LINE + 1:
        return line
    while True:
        rest = stream.readline(1 << 20)
        if not rest or rest.endswith(b"\n"):
            return None


def encode_reply(reply):
    text = json.dumps(reply, separators=(",", ":"), allow_nan=False)
    if len(text) + 1 > MAX_LINE:
        return json.dumps({"id": reply.get("id"), "stage": "emit",
                           "error": "reply of %d bytes is longer than the protocol's 64 MiB" % len(text)})
    return text


def main():
    try:
        h = hello()
    except Exception as e:  # noqa: BLE001
        log("cannot build the hello: %s: %s" % (type(e).__name__, e))
        return 1
    warm_up()
    log("ready (imports took %.1f s, %.1f s to the hello)" % (IMPORT_SECONDS, time.perf_counter() - _t0))
    try:
        write_line(h)
    except BrokenPipeError:
        return 0
    stdin = sys.stdin.buffer
    while True:
        line = read_line(stdin)
        if line is None:
            reply = request_error(None, "line longer than 64 MiB")
        elif not line:
            break
        elif not line.strip():
            continue
        else:
            try:
                reply = handle_line(line)
            except Exception as e:  # noqa: BLE001  (last resort: never die on input)
                reply = request_error(None, "internal: %s: %s" % (type(e).__name__, e))
        try:
            _OUT.write(encode_reply(reply))
            _OUT.write("\n")
            _OUT.flush()
        except BrokenPipeError:
            return 0
        except ValueError as e:  # a value json cannot write; should not happen
            write_line({"id": reply.get("id"), "stage": "emit", "error": "reply not writable: %s" % e})
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
