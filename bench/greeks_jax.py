"""JAX on the CPU for bench/greeks.cpp: the Black-Scholes call price, and the price with its
four Greeks, of 2^22 options in float64, jitted.

  price                jax.jit(price)
  price + 4 Greeks     jax.jit(jax.value_and_grad(sum of price, argnums=(S, T, r, sigma),
                       has_aux=True)): the aux output is the price per option, so, like kiln,
                       the program returns 5 arrays (the sum alone would not give the prices)

Median of `runs` timed calls after a warm-up (the warm-up includes compiling), each ended by
block_until_ready. One thread: XLA's multi-threaded Eigen is turned off, and run_greeks.sh
pins the process to one core with taskset. Outputs are checked against the closed forms in
numpy (scipy.special.erfc); the error is |got - want| / max(1, |want|), as in greeks.cpp.

Usage: greeks_jax.py [runs = 7 [log2_options = 22 [tsv_out]]]
"""

import os
import sys

# Must be set before jax is imported.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import time  # noqa: E402

import numpy as np  # noqa: E402
import scipy.special  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
log2n = int(sys.argv[2]) if len(sys.argv) > 2 else 22
tsv_path = sys.argv[3] if len(sys.argv) > 3 else None
n = 1 << log2n

INV_SQRT2 = 0.70710678118654752


def price(S, K, T, R, V):
    cdf = lambda x: 0.5 * jax.scipy.special.erfc(x * -INV_SQRT2)  # noqa: E731
    vsqrtT = V * jnp.sqrt(T)
    d1 = (jnp.log(S / K) + (R + 0.5 * V * V) * T) / vsqrtT
    d2 = d1 - vsqrtT
    return S * cdf(d1) - K * jnp.exp(-R * T) * cdf(d2)


def total(S, K, T, R, V):
    p = price(S, K, T, R, V)
    return jnp.sum(p), p


price_jit = jax.jit(price)
greeks_jit = jax.jit(jax.value_and_grad(total, argnums=(0, 2, 3, 4), has_aux=True))

rng = np.random.default_rng(11)
s = rng.uniform(10, 100, n)
k = rng.uniform(10, 100, n)
t = rng.uniform(0.1, 2, n)
r = rng.uniform(0, 0.05, n)
v = rng.uniform(0.1, 0.6, n)
args = [jnp.asarray(a) for a in (s, k, t, r, v)]

# Closed forms in numpy.
sq = np.sqrt(t)
e1 = (np.log(s / k) + (r + 0.5 * v * v) * t) / (v * sq)
e2 = e1 - v * sq
disc = k * np.exp(-r * t)
n1 = 0.5 * scipy.special.erfc(-e1 * INV_SQRT2)
n2 = 0.5 * scipy.special.erfc(-e2 * INV_SQRT2)
p1 = np.exp(-0.5 * e1 * e1) / np.sqrt(2 * np.pi)
want = {
    "price": s * n1 - disc * n2,
    "delta": n1,
    "vega": s * p1 * sq,
    "theta": -s * p1 * v / (2 * sq) - r * disc * n2,
    "rho": t * disc * n2,
}


def err(got, name):
    w = want[name]
    return float(np.max(np.abs(np.asarray(got) - w) / np.maximum(1.0, np.abs(w))))


def run_price():
    return price_jit(*args).block_until_ready()


def run_greeks():
    (_, p), (dS, dT, dR, dV) = greeks_jit(*args)
    for a in (p, dS, dT, dR, dV):
        a.block_until_ready()
    return p, dS, dV, dT, dR


def check_price(out):
    return err(out, "price")


def check_greeks(out):
    p, dS, dV, dT, dR = out
    # dT is dC/dT = -theta.
    return max(
        err(p, "price"),
        err(dS, "delta"),
        err(dV, "vega"),
        err(-np.asarray(dT), "theta"),
        err(dR, "rho"),
    )


methods = [
    ["JAX, jit(price)", run_price, check_price, [], [], 0.0],
    ["JAX, jit(value_and_grad), price + 4 Greeks", run_greeks, check_greeks, [], [], 0.0],
]
for m in methods:  # warm-up: compiles
    m[5] = m[2](m[1]())
for rnd in range(runs):
    for j in range(len(methods)):
        m = methods[(j + rnd) % len(methods)]
        c0, w0 = time.process_time(), time.perf_counter()
        out = m[1]()
        w1, c1 = time.perf_counter(), time.process_time()
        m[3].append(1e3 * (w1 - w0))
        m[4].append(1e3 * (c1 - c0))
        del out
for m in methods:  # the timed calls computed the right thing too
    m[5] = max(m[5], m[2](m[1]()))

TOL = 1e-6  # XLA's erfc is its own approximation, not glibc's
ok = True
print(
    f"jax {jax.__version__}, {jax.devices()[0].platform}, XLA_FLAGS={os.environ['XLA_FLAGS']}, "
    f"CPUs allowed: {len(os.sched_getaffinity(0))}; {n} options, f64, median of {runs} runs"
)
rows = []
for name, _, _, wall, cpu, e in methods:
    w, c = float(np.median(wall)), float(np.median(cpu))
    print(f"{name}: {w:.1f} ms wall, {c:.1f} ms CPU, max error {e:.1e}")
    rows.append(f"{name}\t{w:.3f}\t{c:.3f}\t{e:.3g}\n")
    if not e <= TOL:
        print(f"MISMATCH: {name}: max error {e:.3g} > {TOL}")
        ok = False
if tsv_path:
    with open(tsv_path, "w") as f:
        f.writelines(rows)
sys.exit(0 if ok else 1)
