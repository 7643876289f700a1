import numpy as np, torch
from common import lower, run
from unary import M
N=1<<22
lo = np.float32(1e20).view(np.uint32); hi = np.float32(3.4028235e38).view(np.uint32)
bits = np.linspace(lo, hi, N).astype(np.uint32)
x = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
buf, *_ = lower(M(torch.sigmoid), (torch.zeros(x.size),))
got = run(buf, [torch.from_numpy(x)])
bad = ~np.isfinite(got)
pos = x > 0
print('pos first nonfinite', x[pos & bad].min() if (pos & bad).any() else None, 'last finite before', x[pos & ~bad & (x < (x[pos & bad].min() if (pos&bad).any() else np.inf))].max())
print('neg nonfinite count', (~pos & bad).sum(), 'neg examples', x[~pos & bad][:3], got[~pos][:3])
# exact threshold: bisection on bit patterns
a, b = np.float32(1e20).view(np.uint32), x[pos & bad].min().view(np.uint32)
xs = np.arange(a, b+1, max(1,(b-a)//(1<<22)), dtype=np.uint32).view(np.float32)
g = run(lower(M(torch.sigmoid), (torch.zeros(xs.size),))[0], [torch.from_numpy(xs)])
nb = ~np.isfinite(g)
print('refined first nonfinite', xs[nb].min(), 'step', (b-a)//(1<<22))
