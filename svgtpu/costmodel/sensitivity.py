"""Which genuinely unknown constant moves the answer: each with its stated range, a tornado (one
constant at a time to each end of its range) and the interval they give together.

Only constants nobody has measured for this setting are knobs (:data:`KNOBS`).  Recipe *choices* (dense
steps, kept fraction, the attention kernel) are not: they are rows of the scenario table
(:mod:`svgtpu.costmodel.scenarios`).  Nor is what evidence settles: the MXU count and clock (the
compiled probe, when present), the MXU fill of a 128-wide head (the compiled schedule), the kernel's
sparse overhead (the compiled tile table).

**Refitted at each end.**  Moving a constant changes what the calibration point needs, so at each end
the family's efficiency is fitted again (:func:`svgtpu.costmodel.validate.fit_efficiency`) with the knob
applied to the calibration run too: every end of every knob still reproduces the calibration point.
An end at which no efficiency in (0, 1] reproduces the calibration point is not a possible value of that
constant, but the values between it and the last one that does are: the range is cut there (found by bisection)
and the cut end used (``unreachable`` lists the ends ruled out, ``cut`` the value each was cut to).  The interval combines the one-at-a-time swings as a root sum of squares, separately upward and
downward: it treats the constants as independent and their effects as additive, which is what a
tornado chart shows.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

from svgtpu.costmodel.pipeline import Setup, model_video, sparse_layer_efficiency, video_seconds
from svgtpu.costmodel.plausible import ATTENTION_REALIZED
from svgtpu.costmodel.policy import BASE_WAN_27B, EARLIER_FLOW_SHIFT, ExpertSplit, get_policy
from svgtpu.costmodel.validate import (SIDE_CONTROL, Unreachable, attention_untied, family_stretch,
                                       fit_efficiency)


@dataclasses.dataclass(frozen=True)
class Knob:
    """One unknown constant: where it lives in a :class:`Setup` (``field``, ``field.sub``, or a rule of its
    own, ``set``), the two ends of its range (``ends``: a setup's own, where the range depends on how the setup is
    priced), why that range, and when it applies."""

    path: str
    low: Any
    high: Any
    why: str
    applies: Callable[[Setup], bool] = lambda setup: True
    set: Callable[[Setup, Any], Setup] | None = None
    refit: bool = True      # False: the knob cannot move the dense calibration run (nothing to refit)
    ends: Callable[[Setup], tuple] | None = None

    def range(self, setup: Setup) -> tuple:
        """``(low, high)`` for ``setup``."""
        return self.ends(setup) if self.ends is not None else (self.low, self.high)

    def get(self, setup: Setup):
        if self.path == "attention_over_matmul":
            return setup.efficiency.attention / (1.0 if _untied(setup) else setup.efficiency.matmul)
        head, _, tail = self.path.split(":")[0].partition(".")   # "field: which evidence" names one field's reading
        value = getattr(setup, head)
        return getattr(value, tail) if tail else value

    def apply(self, setup: Setup, value) -> Setup:
        if self.set is not None:
            return self.set(setup, value)
        head, _, tail = self.path.partition(".")
        if tail:
            value = dataclasses.replace(getattr(setup, head), **{tail: value})
        return setup.replace(**{head: value})


def _untied(setup: Setup) -> bool:
    """:func:`~svgtpu.costmodel.validate.attention_untied` for ``setup``'s device and table."""
    return attention_untied(setup.device.family, setup.compiled)


def _split(setup: Setup, ratio: float) -> Setup:
    """Attention at ``ratio`` x the matmul efficiency, at most 1; on a TPU priced from the compiled table (attention
    untied from the matmuls) at a realized over static time of ``ratio``."""
    eff = setup.efficiency
    attention = ratio if _untied(setup) else min(1.0, eff.matmul * ratio)
    return dataclasses.replace(setup, efficiency=dataclasses.replace(eff, attention=attention))


def _attention_ends(setup: Setup) -> tuple[float, float]:
    """The attention knob's range: on a TPU priced from the compiled table the plausible range of a kernel's realized
    over static time written before its instrument (:data:`~svgtpu.costmodel.plausible.ATTENTION_REALIZED`, around
    the instrument's central reading), elsewhere a quarter either way of the matmuls' efficiency."""
    return ATTENTION_REALIZED if _untied(setup) else (0.8, 1.25)


def _prior_attention(setup: Setup) -> bool:
    return setup.device.family == "tpu" and setup.compiled_tile() is None


KNOBS = (
    Knob("attention_over_matmul", 0.8, 1.25,
         "the one calibration point fixes one efficiency for the matmuls and attention together; how it splits "
         "between them is unknown (assumption: a quarter either way); a TPU's compiled attention: the realized over "
         "the static schedule, centrally a published kernel time's (svgtpu.costmodel.realized), at its ends the "
         "plausible range written before that instrument (docs/plausibility.md; the fixed-M calls at their own "
         "reading's ratio to it)", set=_split, ends=_attention_ends),
    Knob("efficiency.memory", 0.6, 0.9, "streaming kernels at 60-90 % of HBM bandwidth (assumption)"),
    Knob("efficiency.ici", 0.4, 0.9, "achieved share of ICI link bandwidth (assumption)"),
    Knob("host_seconds_per_step", 0.005, 0.1, "host loop, scheduler and dispatch per step (assumption)"),
    Knob("temporal_fraction", 0.0, 1.0, "share of heads profiling marks temporal (pay the layout transform): "
         "decided by the data at run time"),
    Knob("device.grid_step_seconds", 0.1e-6, 1e-6, "fixed Pallas grid-step cost where no compiled table prices the "
         "kernel (assumption, no public figure)", applies=_prior_attention),
    Knob("efficiency.vector_scale", 0.5, 1.0, "a TPU whose MXU no compiled probe shows (v5e, v5p) has a prior clock (one MAC per "
         "MXU cell per cycle); at two, the clock and so the VPU and EUP rates halve",
         applies=lambda s: s.device.family == "tpu" and not s.device.clock_source.startswith("compiled")),
)

def _with_stretch(setup: Setup, value: float) -> Setup:
    return dataclasses.replace(setup, sparse_stretch=value)


def _with_matmul(setup: Setup, value: float) -> Setup:
    return dataclasses.replace(setup, efficiency=dataclasses.replace(setup.efficiency, matmul=value))


@functools.lru_cache(maxsize=8)
def _calibration_readings(family: str, compiled) -> tuple[tuple[str, float, float, str], ...]:
    """The matmul efficiency refitted on the calibration run under each other reading of it: ``(name, central,
    other, why)``."""
    central = fit_efficiency(family, compiled)["fitted"]
    side = fit_efficiency(family, compiled, dense_control=SIDE_CONTROL)["fitted"]
    moderate = get_policy("maxdiffusion-moderate")[0]
    shift = fit_efficiency(family, compiled, policy=dataclasses.replace(
        moderate, split=ExpertSplit(EARLIER_FLOW_SHIFT)))["fitted"]
    return (("efficiency.matmul: dense calls' kernel", central, side,
             "the calibration run's fixed-M dense calls at our compiled fixed-maximum body (the kernel the run ran, "
             "docs/fixed_max.md; central) or at our compiled online-softmax body, the efficiency refitted on the "
             "moderate run"),
            ("efficiency.matmul: expert split", central, shift,
             f"flow shift {BASE_WAN_27B['flow_shift']:g} (base_wan_27b.yml on the pull request's base, and Wan's own "
             f"t2v_A14B; central) or {EARLIER_FLOW_SHIFT:g} (base_wan_27b.yml before 2026-07-01): which expert runs "
             "each sparse step, the efficiency refitted on the moderate run"))


def sparse_knobs(setup: Setup) -> tuple[Knob, ...]:
    """The sparse-layer evidence as knobs, for a setup at its family's central sparse stretch where the sparse
    layers are priced term by term (:func:`~svgtpu.costmodel.validate.family_stretch` has bounds): the stretch
    over its plausible range (docs/plausibility.md), the calibration refitted at each end, and the matmul
    efficiency under each other reading of the calibration run (:func:`_calibration_readings`); none otherwise."""
    fit = family_stretch(setup.device.family, setup.compiled)
    if fit["bounds"] is None or abs(setup.sparse_stretch - fit["stretch"]) > 1e-12:
        return ()
    stretch = Knob("sparse_stretch", *fit["bounds"],
                   "the realized over the static time of sparse tiles relative to dense ones: its plausible range, "
                   "written before the fit (docs/plausibility.md); the one calibration run refitted at each end",
                   set=_with_stretch)
    readings = tuple(Knob(name, min(a, b), max(a, b), why, set=_with_matmul, refit=False)
                     for name, a, b, why in _calibration_readings(setup.device.family, setup.compiled))
    return (stretch, *readings)


#: Headline quantities the interval and tornado are computed for.
QUANTITIES = ("attention_share", "attention_share_end_to_end", "communication_share", "dense_minutes",
              "svg_minutes", "speedup", "saved_minutes")
SPLIT = ("sparse_attention", "alignment", "fast_path")


def _quantities(result: dict) -> dict[str, float]:
    """The headline quantities, the speedup's split and each chain variant's speedup (``chain_<variant>``: every
    bar of the headline figure has its interval)."""
    return {**{k: result[k] for k in QUANTITIES}, **{f"split_{k}": result["contributions"][k] for k in SPLIT},
            **{f"chain_{row['variant']}": row["speedup_vs_dense"] for row in result["chain"]}}


@functools.lru_cache(maxsize=256)
def _refit(family: str, compiled, knob: Knob, value):
    """The family's efficiency refitted with ``knob`` at ``value`` on the calibration run (cached: the same
    for every setup of the family)."""
    return fit_efficiency(family, compiled, change=lambda s: knob.apply(s, value))


def at_knob(setup: Setup, knob: Knob, value) -> Setup:
    """``setup`` with ``knob`` at ``value`` and the efficiency refitted: the calibration fit (matmul and
    attention) replaced, the knob's own change kept."""
    changed = knob.apply(setup, value)
    if not knob.refit:
        return changed
    fit = _refit(setup.device.family, setup.compiled, knob, value)
    if fit["fitted"] is None:       # nothing to refit (a family without a calibration point)
        return changed
    eff = changed.efficiency
    fitted = fit["efficiency"]
    return dataclasses.replace(changed, efficiency=dataclasses.replace(eff, matmul=fitted.matmul,
                                                                       attention=fitted.attention))


def sensitivity(setup: Setup, knobs: tuple[Knob, ...] | None = None, central_result: dict | None = None) -> dict:
    """The tornado (per knob: each quantity at both ends, the calibration refitted) and the interval per quantity.
    ``knobs``: default :data:`KNOBS` and the sparse-layer evidence (:func:`sparse_knobs`); ``central_result``:
    ``model_video(setup)`` when the caller has it already."""
    knobs = KNOBS + sparse_knobs(setup) if knobs is None else knobs
    central = _quantities(central_result or model_video(setup))
    tornado, unreachable, cut = [], [], {}
    for knob in knobs:
        if not knob.applies(setup):
            continue
        at, ends = {}, {}
        for end, value in zip(("low", "high"), knob.range(setup)):
            try:
                ends[end] = value
                at[end] = _quantities(model_video(at_knob(setup, knob, value)))
            except Unreachable:   # no efficiency in (0, 1] meets the calibration point there: not a possible end
                unreachable.append(f"{knob.path} = {_short(value)}")
                reached = reachable_end(knob, value, knob.get(setup),
                                        lambda k, v: _quantities(model_video(at_knob(setup, k, v))))
                if reached is None:
                    at[end] = central
                else:             # the calibration cuts the range: its last possible value is the end
                    ends[end], at[end] = reached
                    cut[unreachable[-1]] = reached[0]
        tornado.append({"knob": knob.path, "low": ends["low"], "high": ends["high"], "central": knob.get(setup),
                        "why": knob.why, **{f"{q}_low": at["low"][q] for q in central},
                        **{f"{q}_high": at["high"][q] for q in central}})
    band = {}
    for q, c in central.items():
        up = math.sqrt(sum(max(0.0, row[f"{q}_low"] - c, row[f"{q}_high"] - c) ** 2 for row in tornado))
        down = math.sqrt(sum(max(0.0, c - row[f"{q}_low"], c - row[f"{q}_high"]) ** 2 for row in tornado))
        band[q] = {"central": c, "min": c - down, "max": c + up}
    return {"knobs": [row["knob"] for row in tornado], "tornado": tornado, "unreachable": unreachable, "cut": cut,
            **band,
            "method": "one unknown constant at a time to each end of its range, the calibration refitted at each; "
                      "interval = root sum of squares of the swings"}


def reachable_end(knob: Knob, value, inside, at: Callable[[Knob, Any], Any], steps: int = 12):
    """``(v, at(knob, v))`` at the possible value ``v`` of ``knob`` nearest to ``value``, an end the calibration
    point rules out (``at`` raises :class:`~svgtpu.costmodel.validate.Unreachable` there): bisected between it and
    ``inside`` (a value that meets the calibration, the setup's own) to within 2^-``steps`` of the range; ``None``
    for a knob that is not a number."""
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (inside, value)):
        return None
    best, outside = None, value
    for _ in range(steps):
        middle = (inside + outside) / 2
        try:
            best = (middle, at(knob, middle))
            inside = middle
        except Unreachable:
            outside = middle
    return best


def _short(value) -> str:
    """A knob's end as a reader wants it: floats to three significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def tornado_rows(result: dict, quantity: str = "speedup") -> list[dict]:
    """The tornado for one quantity, largest swing first: ``knob, low, high, swing``."""
    rows = [{"knob": r["knob"], "value_at_low": r[f"{quantity}_low"], "value_at_high": r[f"{quantity}_high"],
             "swing": abs(r[f"{quantity}_high"] - r[f"{quantity}_low"]), "range": f"{_short(r['low'])} .. {_short(r['high'])}"}
            for r in result["tornado"]]
    return sorted(rows, key=lambda r: -r["swing"])


def speedup_surface(setup: Setup, sparse_efficiencies, dense_step_shares) -> list[dict]:
    """The end-to-end speedup (aligned SVG mask, fast path) over a grid of sparse efficiency x ``Setup.warmup_steps``
    (the dense-step share), everything else as in ``setup``.  The efficiency axis is the sparse layer's speed over
    its compiled schedule's (:func:`stretch_as_efficiency`): each value is reached through the sparse stretch alone
    (:func:`stretch_for_efficiency`, ``Setup.sparse_efficiency`` 1), so values past 1 exist (a stretch below 1) and
    ``setup``'s own point lies on the surface: at its :func:`stretch_as_efficiency` and dense-step share the speedup
    is ``model_video(setup)``'s.  The recipe lever and the sparse-layer lever side by side (the dense run depends on
    neither)."""
    dense = video_seconds(setup, "dense", True)
    base = dataclasses.replace(setup, sparse_efficiency=1.0)
    stretches = {e: stretch_for_efficiency(base, e) for e in sparse_efficiencies}
    return [{"sparse_efficiency": e, "dense_step_share": w, "sparse_stretch": stretches[e],
             "speedup": dense / video_seconds(dataclasses.replace(base, warmup_steps=w, sparse_stretch=stretches[e]),
                                              "svg-aligned", True)}
            for w in dense_step_shares for e in sparse_efficiencies]


def stretch_for_efficiency(setup: Setup, efficiency: float, steps: int = 60) -> float:
    """The sparse stretch at which ``setup`` (its ``sparse_efficiency`` as given) reaches ``efficiency`` of its
    compiled sparse layer (:func:`stretch_as_efficiency` inverted by bisection on the log of the stretch; the
    efficiency falls as the stretch grows)."""
    low, high = math.log(1e-3), math.log(1e3)
    for _ in range(steps):
        mid = (low + high) / 2
        if stretch_as_efficiency(dataclasses.replace(setup, sparse_stretch=math.exp(mid))) > efficiency:
            low = mid
        else:
            high = mid
    return math.exp((low + high) / 2)


def stretch_as_efficiency(setup: Setup) -> float:
    """The sparse efficiency (on the compiled sparse layer) that ``setup``'s sparse stretch amounts to: the
    compiled sparse layer's time over the stretched one's, times ``setup.sparse_efficiency``."""
    return (sparse_layer_efficiency(setup)
            / sparse_layer_efficiency(dataclasses.replace(setup, sparse_stretch=1.0, sparse_efficiency=1.0)))


__all__ = ["Knob", "KNOBS", "sparse_knobs", "QUANTITIES", "SPLIT", "at_knob", "reachable_end", "sensitivity", "tornado_rows",
           "speedup_surface", "stretch_for_efficiency", "stretch_as_efficiency"]
