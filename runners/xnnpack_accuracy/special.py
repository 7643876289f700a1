"""Special inputs (signed zeros, inf, nan, subnormals, extremes) for every node kind; prints ET/XNNPACK vs torch eager."""
import json, numpy as np, torch
from common import lower, run, describe
from unary import OPS, M
f = np.float32
V = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38, -1.17549435e-38,
              3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, -0.5, -0.25, 2.5, -2.5, 88.72, 88.73, -87.33, -103.9, -104.0,
              1e30, 4e38 / 10, 2.0 ** -149 * 3], dtype=f)
V = np.concatenate([V, np.zeros(32 - V.size % 32 if V.size % 32 else 0, f)])
def show(a):
    return ['-0.0' if (v == 0 and np.signbit(v)) else repr(float(v)) for v in a]
out = {}
for op in OPS:
    fn = OPS[op][0]
    buf, ops, dels, instr, xn = lower(M(fn), (torch.zeros(V.size),))
    got = run(buf, [torch.from_numpy(V)])
    eager = fn(torch.from_numpy(V)).numpy()
    diff = [(show([x])[0], show([g])[0], show([e])[0]) for x, g, e in zip(V, got, eager)
            if not ((g == e and np.signbit(g) == np.signbit(e)) or (np.isnan(g) and np.isnan(e)))]
    out[op] = dict(xnn=xn, differs_from_eager=diff)
    print(op, xn, 'ET!=eager (x, ET, eager):', diff, flush=True)
BIN = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div, 'minimum': torch.minimum, 'maximum': torch.maximum}
class M2(torch.nn.Module):
    def __init__(s, f): super().__init__(); s.f = f
    def forward(s, a, b): return s.f(a, b)
sv = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38], f)
A, B = [a.ravel().copy() for a in np.meshgrid(sv, sv, indexing='ij')]
for op, fn in BIN.items():
    buf, ops, dels, instr, xn = lower(M2(fn), (torch.zeros(A.size), torch.zeros(A.size)))
    got = run(buf, [torch.from_numpy(A), torch.from_numpy(B)])
    eager = fn(torch.from_numpy(A), torch.from_numpy(B)).numpy()
    diff = [(show([a])[0], show([b])[0], show([g])[0], show([e])[0]) for a, b, g, e in zip(A, B, got, eager)
            if not ((g == e and np.signbit(g) == np.signbit(e)) or (np.isnan(g) and np.isnan(e)))]
    out[op] = dict(xnn=xn, differs_from_eager=diff)
    print(op, xn, 'ET!=eager (a, b, ET, eager):', diff, flush=True)
json.dump(out, open('results/special.json', 'w'), indent=1)
