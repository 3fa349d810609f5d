"""How long ``make tpu-bench`` should take on each slice, from the newest preflight record (provenance ``computed``).

No TPU has run it.  The estimate replays :func:`svgtpu.bench.tpu.run` with what is known of each thing it does,
each part with its provenance:

- **compile** (``compiled-v6e``): each program's compile seconds in the preflight record (libtpu on the host that
  ran ``svgtpu bench tpu --preflight``, named in the record; a TPU VM host's compile seconds are not measured, these
  stand for them).  A kernel compiles once: its float64 check runs the program itself, whose compile then serves
  the timed call (JAX's caches: in memory, and ``build/jax-cache`` under ``make tpu-bench``).  A block's check
  compiles its self-attention alone on two heads, which no preflight compiles: *assumed* to take as long as the
  kernels section's program of the same kernel and mask at that resolution;
- **build** (``measured-cpu``): making each program (its masks, Splash's mask info), as the preflight timed it;
- **device** (``modeled-v6e``): each call priced by the cost model as ``svgtpu predict`` prices the run's
  quantities (:mod:`svgtpu.report.predictions`: a kernel one head on one chip, a block one layer of one pass on
  the slice), times the calls the run makes: the check (a kernel: the program; a block: two heads of its kernel;
  the block without attention: one call of it), two in the compile step, one warm-up and the timing rounds;
- **float64 checks** (``measured-cpu``): host numpy on the sampled rows, per head, as the record measured it.

:func:`simulate` replays the run's budget (:class:`svgtpu.bench.gpu_timing.Budget`: a section group's checks run
until the run's deadline, then the group gets its weight's share of the time left for its compiles and rounds; no
check or compile starts past its deadline; rounds shrink to what is left) and
says which programs the run would leave untimed; with no budget it gives the time of the whole run.  Not counted:
starting Python and JAX, making the inputs, writing files.
"""

from __future__ import annotations

import dataclasses
import math

from svgtpu.costmodel.compiled import AUTO

#: The parts of the run's time and their provenance (module doc).
PARTS = {"compile": "compiled-v6e", "build": "measured-cpu", "device": "modeled-v6e", "host_check": "measured-cpu"}
#: A block's check variant -> the kernels section's program its compile is priced as (module doc).
CHECK_KERNEL = {("splash", "dense"): "splash-dense", ("ours", "dense"): "ours-dense-fast",
                ("ours", "svg"): "ours-svg-aligned-fast"}   # a block's SVG runs the snapped mask


@dataclasses.dataclass(frozen=True)
class Cost:
    """Seconds of one program's steps in the run: the check (its compile, device calls, host numpy), the build,
    the compile of the timed call (0 where the check's compile serves it) and one call on the device."""

    name: str
    section: str
    geometry: str
    variant: str
    check_compile_s: float
    check_device_s: float
    check_host_s: float
    build_s: float
    compile_s: float
    call_s: float


def call_seconds(p, compiled=AUTO) -> float:
    """Modeled seconds of one call of :class:`svgtpu.bench.tpu.Program` ``p`` on v6e (``modeled-v6e``), priced from
    the compiled tile table ``compiled`` (:func:`svgtpu.report.predictions.run_setups`)."""
    from svgtpu.bench.tpu import FULL, PRODUCTION_TAG
    from svgtpu.costmodel import dit_seconds, forward_breakdown
    from svgtpu.report.predictions import head_seconds, run_setups
    if p.section == "kernels":
        at = "production" if p.variant.endswith(PRODUCTION_TAG) else "best"
        s = run_setups(FULL.model, p.geometry, 1, ours_at=at, compiled=compiled)[p.kernel]
        return head_seconds(s, p.kernel, p.mask, p.fast_path)
    s = run_setups(p.model, p.geometry, p.chips, p.kept if p.mask == "svg" else None,
                compiled=compiled)["ours" if p.variant == "none" else p.kernel]
    if p.variant == "none":   # one layer of one pass without self-attention
        b = forward_breakdown(s)
        return (sum(b.values()) - b["self_attention"]) / s.model.layers
    per_layer = s.steps * s.sequential_passes * s.model.layers
    return dit_seconds(s, "dense" if p.mask == "dense" else "svg-aligned", True) / per_layer


def costs(record: dict, chips: int, compiled=AUTO) -> list[Cost]:
    """The steps of a run on ``chips`` chips (:func:`svgtpu.bench.tpu.programs`, in run order), from ``record`` (a
    preflight record) and the cost model (priced from the compiled tile table ``compiled``)."""
    from svgtpu.bench.tpu import FULL, programs
    rows = {(r["name"], r["chips"]): r for r in record["programs"]}
    run = programs(FULL, chips)
    missing = [p.name for p in run if (p.name, p.chips) not in rows]
    if missing:
        from svgtpu.errors import BadInput
        raise BadInput(f"preflight record {record.get('path', '')} does not hold {len(missing)} program(s) of the run "
                       f"({', '.join(missing[:3])}): rerun `svgtpu bench tpu --preflight`")
    kernels = {p.name: p for p in run if p.section == "kernels"}
    out = []
    for p in run:
        row = rows[p.name, p.chips]
        host = record.get("host_check", {}).get(p.geometry, {}).get("seconds_per_head", 0.0)   # 0: not recorded
        call = call_seconds(p, compiled)
        if p.section == "kernels":   # the check is the program: its compile and one call
            out.append(Cost(p.name, p.section, p.geometry, p.variant, row["compile_s"], call, host,
                            row.get("build_s", 0.0), 0.0, call))
        elif p.variant == "none":    # its check is a finite output: the block's compile and one call, after the build
            out.append(Cost(p.name, p.section, p.geometry, p.variant, 0.0, 0.0, 0.0, row.get("build_s", 0.0),
                            row["compile_s"], call))
        else:                        # its self-attention on two heads, priced as the kernel's program
            kernel = kernels[f"kernels {p.geometry} {CHECK_KERNEL[p.kernel, p.mask]}"]
            out.append(Cost(p.name, p.section, p.geometry, p.variant, rows[kernel.name, kernel.chips]["compile_s"],
                            2 * call_seconds(kernel, compiled), 2 * host, row.get("build_s", 0.0), row["compile_s"], call))
    return out


def simulate(steps: list[Cost], budget_s: float = math.inf) -> dict:
    """Replay :func:`svgtpu.bench.tpu.run`'s order and budget over ``steps``: ``{"elapsed_s", "parts" (seconds per
    :data:`PARTS`), "untimed" ({name: why}), "rounds" ({section: timing rounds})}``.  It follows ``run`` and
    :func:`svgtpu.bench.gpu_timing.time_variants` step by step: a change to how they spend the budget belongs here too."""
    from svgtpu.bench.tpu import FULL
    weights = dict(FULL.weights)
    now, parts, untimed, rounds_of = 0.0, dict.fromkeys(PARTS, 0.0), {}, {}

    def spend(**seconds):
        nonlocal now
        for part, s in seconds.items():
            parts[part] += s
            now += s
    groups: dict[tuple[str, str], list[Cost]] = {}
    for c in steps:
        groups.setdefault((c.section, c.geometry), []).append(c)
    shares = [weights[section] for section, _ in groups]
    for i, ((section, geometry), group) in enumerate(groups.items()):
        section_deadline = budget_s   # the checks: only the run's deadline stops them
        left = lambda: min(budget_s, section_deadline) - now  # noqa: E731
        checked = []
        for c in group:
            if left() <= 0:
                untimed[c.name] = "time budget: no time left to check it"
                continue
            spend(compile=c.check_compile_s, device=c.check_device_s, host_check=c.check_host_s)
            checked.append(c)
        section_deadline = now + shares[i] / sum(shares[i:]) * max(budget_s - now, 0.0)   # the group's share
        spend(build=sum(c.build_s for c in checked))
        for c in checked:
            if c.variant == "none":   # its finite-output check: the first call compiles it
                spend(compile=c.compile_s, device=c.call_s)
        timed = []
        for c in checked:
            if left() <= 0:
                untimed[c.name] = "time budget: no time left to compile it"
                continue
            spend(compile=0.0 if c.variant == "none" else c.compile_s, device=2 * c.call_s)
            timed.append(c)
        if not timed:
            continue
        per_round = sum(c.call_s for c in timed)
        rounds = 1 if left() < 2 * per_round else int(min(FULL.max_rounds, left() // per_round - 1))
        if left() >= 2 * per_round:
            spend(device=(rounds + 1) * per_round)   # interleaved_times' warm-up call, then the rounds
        rounds_of[f"{section} {geometry}"] = rounds
    return {"elapsed_s": now, "parts": parts, "untimed": untimed, "rounds": rounds_of}


def budget_to_time_all(steps: list[Cost], precision_s: float = 1.0) -> float:
    """The smallest budget (to ``precision_s``, by bisection) under which :func:`simulate` leaves no program untimed:
    more than the whole run's time where one section's share of the budget is short of what it needs."""
    high = max(simulate(steps)["elapsed_s"], precision_s)
    while simulate(steps, high)["untimed"]:
        high *= 2
    low = 0.0
    while high - low > precision_s:
        mid = (low + high) / 2
        low, high = (mid, high) if simulate(steps, mid)["untimed"] else (low, mid)
    return high


def expected_time(record: dict, compiled=AUTO) -> dict:
    """Per slice (``v6e-1``, ``v6e-8``): the whole run with nothing cut (``full``) and under the run's budget
    (``budgeted``, :data:`svgtpu.bench.tpu.FULL.budget_s`), each :func:`simulate`'s answer, and the budget that would
    time every program (:func:`budget_to_time_all`); the device time priced from the compiled tile table
    ``compiled`` (default: the one the cost model reads); provenance ``computed``."""
    from svgtpu.bench.tpu import FULL, SLICES
    from svgtpu.report.preflight_record import slice_name
    out = {}
    for chips in SLICES:
        steps = costs(record, chips, compiled)
        out[slice_name(chips)] = {"chips": chips, "programs": len(steps), "full": simulate(steps),
                                  "budgeted": simulate(steps, FULL.budget_s),
                                  "budget_to_time_all_s": budget_to_time_all(steps)}
    return {"provenance": "computed", "parts": PARTS, "budget_s": FULL.budget_s, "max_rounds": FULL.max_rounds,
            "record": record.get("path"), "slices": out}


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{seconds:.0f} s"


def _untimed(untimed: dict, chips: int) -> str:
    """The programs a budgeted run leaves untimed, per section group: ``kernels 1440p: all 13``, else the variants."""
    from svgtpu.bench.tpu import FULL, programs
    if not untimed:
        return "none"
    groups: dict[str, list] = {}
    for p in programs(FULL, chips):
        groups.setdefault(f"{p.section} {p.geometry}", []).append(p)
    parts = []
    for group, ps in groups.items():
        cut = [p.variant for p in ps if p.name in untimed]
        if cut:
            parts.append(f"{group}: " + (f"all {len(ps)}" if len(cut) == len(ps) else ", ".join(cut)))
    return "; ".join(parts)


def brief(record: dict | None, compiled=AUTO) -> str:
    """The paper's one sentence of :func:`readme_block`: whether the run's programs compile and how long it should
    take per slice (``tpu-run-brief``)."""
    from svgtpu.report import preflight_record as preflight
    if record is None or not record["passed"] or preflight.uncovered(record):
        return ("Whether every program of that run compiles for v6e is not known from a preflight record that holds "
                "them all: README's TPU section says why.")
    t = expected_time(record, compiled)
    times = " and ".join(f"{_minutes(s['budgeted']['elapsed_s'])} on {name}" for name, s in t["slices"].items())
    stale = "" if preflight.sources_match(record) else " (the sources changed since: it is to be run again)"
    return (f"Every one of the {len(record['programs'])} programs it runs on v6e-1 or v6e-8 compiles for v6e (`{record['provenance']}`, "
            f"`svgtpu bench tpu --preflight` at {record['commit']}){stale}, and it should take about {times} "
            f"(`{t['provenance']}`: compiles as long as on the {record['host']['cpus']}-core host that ran the "
            "preflight, the cost model's device time; README's TPU section gives the parts).")


def readme_block(record: dict | None, sources_match: bool | None = None, compiled=AUTO) -> str:
    """README's ``tpu-run-time`` block: the preflight's verdict and the run's expected time per slice with its parts,
    from ``record`` (:func:`svgtpu.report.preflight_record.newest_record`) and the compiled tile table ``compiled``
    (``svgtpu paper``: the one in the figures folder it fills from); ``sources_match``: whether the record's source
    key is the current sources' (default: computed)."""
    if record is None:
        return ("**Preflight: no record.** No `figures/preflight/` record is committed, so neither the preflight's "
                "verdict nor the run's expected time is known: run `svgtpu bench tpu --preflight` (libtpu, any "
                "machine), commit its record, then `svgtpu paper`.")
    from pathlib import Path

    from svgtpu.report import preflight_record as preflight
    if sources_match is None:
        sources_match = preflight.sources_match(record)
    rows, missing = record["programs"], preflight.uncovered(record)
    ok = sum(bool(r["compiled"]) for r in rows)
    host = record["host"]
    verdict = "every program compiles" if record["passed"] else f"**{len(rows) - ok} would fail**"
    lines = [f"**Preflight** (`svgtpu bench tpu --preflight`, `{preflight.RECORDS_DIR / Path(record['path']).name}`): "
             f"{ok} of {len(rows)} programs compile for v6e ({verdict}; `{record['provenance']}`), at commit "
             f"{record['commit']}, jax {record['jax']}, libtpu {record['libtpu']}, compiled on a {host['cpus']}-core "
             f"host (load {host['loadavg'][0]:.1f} at its start) in {_minutes(record['wall_s'])}. "
             + ("The sources the programs are built from still match it." if sources_match else
                "**The sources changed since: rerun `svgtpu bench tpu --preflight`.**")]
    if not record["passed"]:
        lines.append("Failing: " + "; ".join(f"{r['name']} ({r['topology']}): {r['reason']}" for r in rows
                                               if not r["compiled"]))
    if missing:
        return "\n".join(lines + ["", f"**The record does not hold {len(missing)} program(s) the run now has** "
                                       f"({', '.join(missing[:4])}{'...' if len(missing) > 4 else ''}), so the run's "
                                       "expected time is not computed: rerun `svgtpu bench tpu --preflight`."])
    t = expected_time(record, compiled)
    unrecorded = not record.get("host_check")   # a record from before the preflight timed the checks
    lines += ["", f"**Expected run time of `make tpu-bench`** (`{t['provenance']}`, "
                  "`svgtpu.report.tpu_run_time.expected_time`; how: that module's docstring):", "",
              "| slice | programs | compile | build | device | float64 checks | whole run | with its "
              f"{t['budget_s']:.0f} s budget | left untimed by the budget | a budget that times all |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in t["slices"].items():
        full, cut = s["full"], s["budgeted"]
        parts = " | ".join("not in the record" if p == "host_check" and unrecorded else _minutes(full["parts"][p])
                           for p in PARTS)
        untimed = _untimed(cut["untimed"], s["chips"])
        lines.append(f"| {name} | {s['programs']} | {parts} | **{_minutes(full['elapsed_s'])}** | "
                     f"{_minutes(cut['elapsed_s'])} | {untimed} | {s['budget_to_time_all_s']:.0f} s |")
    lines += ["", "Parts with nothing cut, each program with its "
                  f"{t['max_rounds']} timing rounds: compile (`{PARTS['compile']}`: the record's compile seconds on "
                  f"that {host['cpus']}-core host, standing for a TPU VM host's, not measured; a block's check "
                  "compiles its attention alone, assumed as long as the kernel's), build (`measured-cpu`), device "
                  f"(`{PARTS['device']}`: the cost model's price of each call), float64 checks (`measured-cpu`: "
                  "host numpy on that host). Not counted: starting JAX, making inputs, writing files."]
    return "\n".join(lines)


#: On-demand price of one v6e chip for an hour, in US dollars: "Trillium is available starting at $2.7000 per
#: chip-hour" (Google's announcement of Trillium's general availability, 2024-12-11,
#: https://cloud.google.com/blog/products/compute/trillium-tpu-is-ga, as reported by
#: https://neowin.net/amp/google-takes-on-nvidia-blackwell-gpus-with-the-new-trillium-tpus).  Google bills a TPU
#: while it is READY (https://cloud.google.com/tpu/pricing).  A published price, not ours: check it before renting.
V6E_DOLLARS_PER_CHIP_HOUR = 2.70


def cost_block(record: dict | None, compiled=AUTO) -> str:
    """README's ``tpu-run-cost`` line: per slice the expected time of ``make tpu-bench`` under its budget
    (:func:`expected_time`, ``computed``) and its on-demand price at :data:`V6E_DOLLARS_PER_CHIP_HOUR` per chip-hour;
    creating the VM, installing and copying the run home are not counted (not measured)."""
    from svgtpu.report import preflight_record as preflight
    if record is None or not record["passed"] or preflight.uncovered(record):
        return ("The run's expected time, so its cost, is not known: no preflight record holds every program of it "
                "(above).")
    t = expected_time(record, compiled)
    parts = []
    for name, s in t["slices"].items():
        seconds = s["budgeted"]["elapsed_s"]
        parts.append(f"{name}: about {_minutes(seconds)}, ${seconds / 3600 * s['chips'] * V6E_DOLLARS_PER_CHIP_HOUR:.2f}")
    stale = "" if preflight.sources_match(record) else " (from a preflight record whose sources changed since)"
    return (f"**Expected time and on-demand cost of `make tpu-bench`** (`{t['provenance']}`{stale}; at "
            f"${V6E_DOLLARS_PER_CHIP_HOUR:.2f} per chip-hour, the published on-demand v6e price, "
            "`svgtpu.report.tpu_run_time.V6E_DOLLARS_PER_CHIP_HOUR` cites it): " + "; ".join(parts)
            + ". Not counted: creating the VM, installing, copying the run home (not measured).")


__all__ = ["V6E_DOLLARS_PER_CHIP_HOUR", "cost_block", "PARTS", "CHECK_KERNEL", "Cost", "call_seconds", "costs", "simulate", "budget_to_time_all", "expected_time",
           "brief", "readme_block"]
