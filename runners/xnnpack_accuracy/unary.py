"""Exhaustive (all 2^32 float32 bit patterns) accuracy sweep of XNNPACK unary node kinds via ExecuTorch.
usage: python unary.py OP [OP...]   -> writes results/unary_OP.json and prints a summary."""
import sys, json, time, math, numpy as np, torch
from common import lower, run, describe, delegated_only

TINY = np.finfo(np.float32).tiny
def sig64(x):
    with np.errstate(over='ignore'):
        return 1.0 / (1.0 + np.exp(-x))
OPS = {
  # name: (torch fn, float64 reference, [(domain name, predicate on float64 x)])
  'sigmoid': (torch.sigmoid, sig64, [('[-30,30]', lambda x: np.abs(x) <= 30)]),
  'tanh':    (torch.tanh, np.tanh, [('[-30,30]', lambda x: np.abs(x) <= 30), ('|x|<=2^-10', lambda x: np.abs(x) <= 2**-10)]),
  'exp':     (torch.exp, np.exp, [('[-104,89]', lambda x: (x >= -104) & (x <= 89)),
                                  ('[-87.33,88.72] normal out', lambda x: (x >= -87.33) & (x <= 88.72))]),
  'sin':     (torch.sin, np.sin, [(f'|x|<={d}', (lambda d: lambda x: np.abs(x) <= d)(d)) for d in (math.pi, 1e2, 1e4, 1e5, 1e6, 1e7, 1e8, 2*math.pi*2**24)]),
  'cos':     (torch.cos, np.cos, [(f'|x|<={d}', (lambda d: lambda x: np.abs(x) <= d)(d)) for d in (math.pi, 1e2, 1e4, 1e5, 1e6, 1e7, 1e8, 2*math.pi*2**24)]),
  'sqrt':    (torch.sqrt, np.sqrt, [('[0,1e30]', lambda x: (x >= 0) & (x <= 1e30))]),
  'abs':     (torch.abs, np.abs, []),
  'neg':     (torch.neg, np.negative, []),
  'square':  (lambda x: torch.pow(x, 2), np.square, []),
  'ceil':    (torch.ceil, np.ceil, []),
  'floor':   (torch.floor, np.floor, []),
  'clamp':   (lambda x: torch.clamp(x, -1.5, 2.25), lambda x: np.clip(x, -1.5, 2.25), []),
  'hardtanh':(lambda x: torch.nn.functional.hardtanh(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0), []),
  'clone':   (lambda x: x.clone(), lambda x: x, []),
}

class M(torch.nn.Module):
    def __init__(self, f): super().__init__(); self.f = f
    def forward(self, x): return self.f(x)

CH = 1 << 24
def sweep(op):
    f, ref, doms = OPS[op]
    buf, ops, dels, instr, xn = lower(M(f), (torch.zeros(CH, dtype=torch.float32),))
    info = {'op': op, 'lowering': describe(ops, dels, instr, xn), 'fully_delegated': delegated_only(ops, dels, instr)}
    print(op, info['lowering'], flush=True)
    doms = [('all finite', lambda x: np.isfinite(x))] + doms
    D = {d: dict(n=0, mism=0, max_ulp=0.0, at_ulp=None, max_abs=0.0, at_abs=None, max_rel=0.0, at_rel=None) for d, _ in doms}
    binade = {}   # exponent field of x -> [max_ulp, max_abs, x_at_ulp]
    sub = dict(in_sub_n=0, in_sub_mism=0, in_sub_as_zero=0, in_sub_ex=None,
               out_sub_n=0, out_sub_mism=0, out_sub_flushed=0, out_sub_ex=None,
               nonfinite_mism=0, nonfinite_ex=None)
    t0 = time.time()
    for c in range(1 << 8):
        bits = np.arange(c * CH, (c + 1) * CH, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32)
        got = run(buf, [torch.from_numpy(x)])
        x64 = x.astype(np.float64)
        with np.errstate(all='ignore'):
            r64 = ref(x64)
        r32 = r64.astype(np.float32)
        same = (got.view(np.uint32) == r32.view(np.uint32)) | (np.isnan(got) & np.isnan(r32))
        # +-0 sign mismatch counts as mismatch only if value differs; treat -0 == +0 as equal value
        same |= (got == 0) & (r32 == 0)
        insub = (x != 0) & (np.abs(x) < TINY)
        outsub = (r32 != 0) & (np.abs(r32) < TINY)
        nonfin = ~np.isfinite(got) | ~np.isfinite(r32)
        sub['in_sub_n'] += int(insub.sum()); sub['out_sub_n'] += int((outsub & ~insub).sum())
        mi = np.flatnonzero(~same)
        if mi.size == 0: continue
        xm, gm, rm, r64m = x[mi], got[mi], r32[mi], r64[mi]
        nf = nonfin[mi]; isb = insub[mi]; osb = outsub[mi] & ~isb
        if nf.any():
            sub['nonfinite_mism'] += int(nf.sum())
            if sub['nonfinite_ex'] is None:
                j = np.flatnonzero(nf)[0]; sub['nonfinite_ex'] = [float(xm[j]), float(gm[j]), float(rm[j])]
        if isb.any():
            sub['in_sub_mism'] += int(isb.sum())
            with np.errstate(all='ignore'):
                z = ref(np.zeros(1))[0]; zs = ref(-np.zeros(1))[0]
            g = gm[isb]; sub['in_sub_as_zero'] += int(((g == np.float32(z)) | (g == np.float32(zs))).sum())
            if sub['in_sub_ex'] is None:
                j = np.flatnonzero(isb)[0]; sub['in_sub_ex'] = [float(xm[j]), float(gm[j]), float(rm[j])]
        if osb.any():
            sub['out_sub_mism'] += int(osb.sum()); sub['out_sub_flushed'] += int((gm[osb] == 0).sum())
            if sub['out_sub_ex'] is None:
                j = np.flatnonzero(osb)[0]; sub['out_sub_ex'] = [float(xm[j]), float(gm[j]), float(rm[j])]
        norm = ~nf & ~isb & ~osb
        if not norm.any(): continue
        xm, gm, rm, r64m = xm[norm], gm[norm], rm[norm], r64m[norm]
        ae = np.abs(gm.astype(np.float64) - rm.astype(np.float64))
        ul = ae / np.spacing(np.abs(rm)).astype(np.float64)
        with np.errstate(all='ignore'):
            re = np.where(rm != 0, ae / np.abs(rm.astype(np.float64)), np.inf)
        x64m = xm.astype(np.float64)
        for d, pred in doms:
            k = pred(x64m)
            if not k.any(): continue
            S = D[d]; S['mism'] += int(k.sum())
            for nm, arr in (('ulp', ul), ('abs', ae), ('rel', re)):
                a = arr[k]; j = int(np.argmax(a))
                if a[j] > S['max_' + nm]:
                    S['max_' + nm] = float(a[j]); S['at_' + nm] = [float(xm[k][j]), float(gm[k][j]), float(rm[k][j])]
        e = ((xm.view(np.uint32) >> 23) & 0xff).astype(np.int64)
        order = np.lexsort((ul, e)); es = e[order]
        last = np.r_[np.flatnonzero(es[1:] != es[:-1]), es.size - 1]
        for j in last:
            ee = int(es[j]); i = order[j]
            b = binade.setdefault(ee, [0.0, 0.0, None])
            if ul[i] > b[0]: b[0] = float(ul[i]); b[2] = float(xm[i])
        order = np.lexsort((ae, e)); es = e[order]
        last = np.r_[np.flatnonzero(es[1:] != es[:-1]), es.size - 1]
        for j in last:
            ee = int(es[j]); i = order[j]
            b = binade.setdefault(ee, [0.0, 0.0, None]); b[1] = max(b[1], float(ae[i]))
    # sample counts per domain (over all 2^32 patterns)
    for d, pred in doms:
        cnt = 0
        for c in range(1 << 8):
            bits = np.arange(c * CH, (c + 1) * CH, dtype=np.uint64).astype(np.uint32)
            xx = bits.view(np.float32)
            cnt += int((pred(xx.astype(np.float64)) & ~((xx != 0) & (np.abs(xx) < TINY))).sum())
        D[d]['n'] = cnt
    info.update(domains=D, subnormal=sub, binade={str(k - 127): v for k, v in sorted(binade.items())}, seconds=time.time() - t0)
    json.dump(info, open(f'results/unary_{op}.json', 'w'), indent=1)
    for d in D:
        S = D[d]; print(f"  {d}: n={S['n']} mism={S['mism']} maxulp={S['max_ulp']:.4g} at {S['at_ulp']} maxabs={S['max_abs']:.4g} at {S['at_abs']} maxrel={S['max_rel']:.4g} at {S['at_rel']}")
    print('  subnormal/nonfinite:', sub, f'{time.time()-t0:.0f}s', flush=True)

if __name__ == '__main__':
    import os; os.makedirs('results', exist_ok=True)
    for op in sys.argv[1:]: sweep(op)
