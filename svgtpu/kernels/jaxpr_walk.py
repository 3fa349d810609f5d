"""Walking a traced program: the nested jaxprs of an equation and the body of a Pallas kernel.

The vector-op counts of C4 (:mod:`svgtpu.bench.kernel_timing`) and the cost model's per-score kernel work
(:mod:`svgtpu.costmodel.kernel_work`) both read the jaxpr of our kernel's body; this is the one
place that knows how to find it.
"""

from __future__ import annotations

from typing import Iterator

import jax.extend.core


def sub_jaxprs(eqn) -> Iterator[jax.extend.core.Jaxpr]:
    """The jaxprs nested in one equation's parameters (cond branches, loop bodies, pjit, ...)."""
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jax.extend.core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jax.extend.core.Jaxpr):
                yield item


def pallas_kernel_body(jaxpr) -> jax.extend.core.Jaxpr | None:
    """The kernel body of the first ``pallas_call`` in ``jaxpr`` (searched depth first), or None."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            return eqn.params["jaxpr"]
        for sub in sub_jaxprs(eqn):
            found = pallas_kernel_body(sub)
            if found is not None:
                return found
    return None


def when_bodies(kernel_body) -> list[jax.extend.core.Jaxpr]:
    """The ``pl.when`` bodies at the top level of a kernel body, in trace order: each ``cond``'s
    last branch, the one a true predicate takes."""
    return [eqn.params["branches"][-1].jaxpr for eqn in kernel_body.eqns if eqn.primitive.name == "cond"]
