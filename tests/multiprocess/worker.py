"""One process of tests/test_multiprocess.py's 2-process job (started by svgtpu.launch.launch).

Every process computes the single-device SVG attention on its own first device, then the same on a
global 2-process mesh, head-parallel and Ulysses (whose all-to-alls cross the processes).  Process 0
prints the largest differences as one JSON object.  (Sampling across processes:
test_generate_two_processes_equal_one.)
"""

import argparse
import functools
import json

from svgtpu.launch import initialize

parser = argparse.ArgumentParser()
parser.add_argument("--coordinator")
parser.add_argument("--num-processes", type=int)
parser.add_argument("--process-id", type=int)
args = parser.parse_args()
initialize(args.coordinator, args.num_processes, args.process_id)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from svgtpu.attention.sharding import global_array, head_parallel, make_mesh, to_host, ulysses  # noqa: E402
from svgtpu.attention.svg import SVGConfig, svg_attention  # noqa: E402
from svgtpu.geometry import VideoGeometry  # noqa: E402

assert jax.process_count() == 2 and jax.local_device_count() == 3 and jax.device_count() == 6
local = jax.local_devices()[0]
out = {"process_count": jax.process_count(), "devices": jax.device_count()}

g = VideoGeometry(2, 10, 15)  # F = 150, L = 300: frames and L are not tile multiples
svg = functools.partial(svg_attention, geometry=g, config=SVGConfig(multiplier=1.0, align="snap", block_q=128,
                                                                      block_kv=128),
                        key=jax.random.PRNGKey(3), step=jnp.int32(7), num_steps=10, layer=jnp.int32(2), num_layers=4)
rng = np.random.default_rng(20261201)
q, k, v = (rng.standard_normal((2, 6, g.L, 64)).astype(np.float32) for _ in range(3))
ref = np.asarray(jax.jit(svg)(*(jax.device_put(x, local) for x in (q, k, v))))
# devices ordered so that every mesh axis below crosses the two processes
for name, wrap, mesh, spec in [
        ("heads 2x3", head_parallel, make_mesh(data=2, heads=3), P("data", ("heads", "seq"))),
        ("ulysses 2x3 (seq across processes)", ulysses,
         make_mesh(data=1, heads=3, seq=2, devices=[d for pair in zip(jax.local_devices(), [
             d for d in jax.devices() if d.process_index != jax.process_index()]) for d in sorted(
             pair, key=lambda d: d.process_index)]), P("data", "heads", "seq"))]:
    sharding = NamedSharding(mesh, spec)
    result = jax.jit(wrap(svg, mesh))(*(global_array(x, sharding) for x in (q, k, v)))
    assert not result.is_fully_addressable  # the output spans both processes
    out[f"svg {name}"] = float(np.abs(to_host(result) - ref).max())

if jax.process_index() == 0:
    print(json.dumps(out))
