"""Binary elementwise node kinds (Add/Subtract/Multiply/Div/Minimum/Maximum) vs correctly rounded float64->float32.
Tensor-tensor, runtime scalar (shape [1] broadcast) on either side, and a constant python-scalar divisor."""
import json, numpy as np, torch
from common import lower, run, describe, delegated_only
TINY = np.finfo(np.float32).tiny
rng = np.random.default_rng(1)
N = 1 << 22

def rand_bits(n):   # uniformly random finite float32 bit patterns (all exponents incl. subnormals)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x = b.view(np.float32)
    bad = ~np.isfinite(x); x[bad] = 1.0
    return x
def rand_log(n, lo=-40, hi=40):  # log-uniform magnitudes, random signs
    return (rng.choice([-1, 1], n) * 2.0 ** rng.uniform(lo, hi, n)).astype(np.float32)

def pairs():
    P = {}
    P['random bits'] = (rand_bits(N), rand_bits(N))
    P['log-uniform 2^+-40'] = (rand_log(N), rand_log(N))
    a = rand_log(N, -20, 20); d = rng.integers(-300, 300, N).astype(np.int32)
    P['near-equal (cancellation)'] = (a, (a.view(np.int32) + d).view(np.float32))
    # operands / results around the subnormal boundary
    P['tiny operands 2^-130..2^-100'] = (rand_log(N, -149, -100), rand_log(N, -149, -100))
    P['result near 2^-126 (mul: 2^-63 each)'] = (rand_log(N, -70, -56), rand_log(N, -70, -56))
    return P

OPS = {'add': (torch.add, np.add), 'sub': (torch.sub, np.subtract), 'mul': (torch.mul, np.multiply),
       'div': (torch.div, np.divide), 'minimum': (torch.minimum, np.minimum), 'maximum': (torch.maximum, np.maximum)}

class M2(torch.nn.Module):
    def __init__(s, f): super().__init__(); s.f = f
    def forward(s, a, b): return s.f(a, b)
class MC(torch.nn.Module):
    def __init__(s, f, c): super().__init__(); s.f = f; s.c = c
    def forward(s, a): return s.f(a, s.c)

def measure(a, b, got, ref):
    a = a.astype(np.float32); b = np.broadcast_to(b, a.shape).astype(np.float32)
    r64 = ref(a.astype(np.float64), b.astype(np.float64)); r32 = r64.astype(np.float32)
    same = (got.view(np.uint32) == r32.view(np.uint32)) | (np.isnan(got) & np.isnan(r32)) | ((got == 0) & (r32 == 0))
    insub = ((a != 0) & (np.abs(a) < TINY)) | ((b != 0) & (np.abs(b) < TINY))
    outsub = (r32 != 0) & (np.abs(r32) < TINY)
    fin = np.isfinite(r32) & np.isfinite(got)
    normal = ~insub & ~outsub & fin
    res = dict(n=int(a.size), n_normal=int(normal.sum()), mism_normal=int((~same & normal).sum()),
               n_in_sub=int(insub.sum()), mism_in_sub=int((~same & insub).sum()),
               n_out_sub=int((outsub & ~insub).sum()), out_sub_flushed_to_0=int(((got == 0) & outsub & ~insub).sum()),
               mism_out_sub=int((~same & outsub & ~insub).sum()),
               nonfinite_mism=int((~same & ~fin).sum()))
    m = ~same & normal
    if m.any():
        ae = np.abs(got[m].astype(np.float64) - r32[m].astype(np.float64)); ul = ae / np.spacing(np.abs(r32[m])).astype(np.float64)
        j = int(np.argmax(ul)); res['max_ulp_normal'] = float(ul[j]); res['at'] = [float(a[m][j]), float(b[m][j]), float(got[m][j]), float(r32[m][j])]
    else:
        res['max_ulp_normal'] = 0.0
    for key, mask in (('in_sub_example', ~same & insub), ('out_sub_example', ~same & outsub & ~insub), ('nonfinite_example', ~same & ~fin)):
        if mask.any():
            j = np.flatnonzero(mask)[0]; res[key] = [float(a[j]), float(b[j]), float(got[j]), float(r32[j])]
    return res

out = {}
P = pairs()
for op, (tf, nf) in OPS.items():
    for variant in ('tensor-tensor', 'tensor-scalar[1]', 'scalar[1]-tensor'):
        if variant == 'tensor-tensor': ex = (torch.zeros(N), torch.zeros(N))
        elif variant == 'tensor-scalar[1]': ex = (torch.zeros(N), torch.zeros(1))
        else: ex = (torch.zeros(1), torch.zeros(N))
        buf, ops, dels, instr, xn = lower(M2(tf), ex)
        key = f'{op} {variant}'; out[key] = {'lowering': describe(ops, dels, instr, xn), 'fully_delegated': delegated_only(ops, dels, instr)}
        print(key, out[key]['lowering'], flush=True)
        for pn, (a, b) in P.items():
            if variant == 'tensor-tensor': A, B = a, b
            elif variant == 'tensor-scalar[1]':
                A = a; B = b[:1].copy()
            else:
                A = a[:1].copy(); B = b
            # for scalar variants run several different scalars
            scal = [None] if variant == 'tensor-tensor' else list(b[:8]) + [np.float32(3.0), np.float32(10.0), np.float32(0.1), np.float32(7.0)]
            agg = None
            for s in scal:
                if variant == 'tensor-scalar[1]': B = np.array([s], np.float32)
                elif variant == 'scalar[1]-tensor': A = np.array([s], np.float32)
                got = run(buf, [torch.from_numpy(np.ascontiguousarray(A)), torch.from_numpy(np.ascontiguousarray(B))])
                AA, BB = np.broadcast_arrays(A, B)
                r = measure(AA, BB, got, nf)
                if agg is None: agg = r
                else:
                    for k2, v in r.items():
                        if isinstance(v, int): agg[k2] += v
                    if r['max_ulp_normal'] > agg['max_ulp_normal']: agg['max_ulp_normal'] = r['max_ulp_normal']; agg['at'] = r.get('at')
                    for k2 in ('in_sub_example', 'out_sub_example', 'nonfinite_example'):
                        if k2 in r and k2 not in agg: agg[k2] = r[k2]
            out[key][pn] = agg
            print('   ', pn, agg, flush=True)
# constant python-scalar divisor: what does ET/XNNPACK do with x / c ?
for c in (3.0, 10.0, 0.1, 7.0):
    buf, ops, dels, instr, xn = lower(MC(torch.div, c), (torch.zeros(N),))
    a = P['log-uniform 2^+-40'][0]
    got = run(buf, [torch.from_numpy(a)])
    r = measure(a, np.float32(c), got, np.divide)
    key = f'div by python constant {c}'; out[key] = {'lowering': describe(ops, dels, instr, xn), 'log-uniform': r}
    print(key, out[key], flush=True)
json.dump(out, open('results/binary.json', 'w'), indent=1)
