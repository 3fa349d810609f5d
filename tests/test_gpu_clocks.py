"""The GPU benchmark's clock log (svgtpu.bench.gpu_clocks) against a stand-in nvidia-smi: lines parsed field by
field, samples given to the call that ran while they were taken (counted here by hand from the intervals), a
driver that refuses a field answered with the basic fields, no nvidia-smi said in words."""

import sys
import textwrap
import time

import pytest

from svgtpu.bench import gpu_clocks
from svgtpu.bench.gpu_clocks import BASIC, QUERY, ClockLog, clock_line, parse_line, reason_names
from svgtpu.bench.gpu_results import clock_lines

#: A stand-in for nvidia-smi: prints one line of the asked fields every ``-lms`` with the current time;
#: the SM clock is 1980 MHz, or 1500 with the software power cap set while the file named by argv[1] exists.
FAKE = textwrap.dedent("""
    import datetime, os, sys, time
    flag, refuse = sys.argv[1], sys.argv[2]
    args = dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a)
    fields = args["--query-gpu"].split(",")
    if refuse in fields:
        print(f'Field "{refuse}" is not a valid field to query.'); sys.exit(2)
    while True:
        capped = os.path.exists(flag)
        now = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        value = {"timestamp": now, "clocks.sm": "1500" if capped else "1980", "clocks.max.sm": "1980",
                 "power.draw": "699.50" if capped else "350.00", "power.limit": "700.00", "temperature.gpu": "61",
                 "clocks_throttle_reasons.active": "0x0000000000000004" if capped else "0x0000000000000000"}
        print(", ".join(value[f] for f in fields), flush=True)
        time.sleep(int(args["--loop-ms"]) / 1000)
""")


def test_parse_line_reads_each_field_and_refuses_what_is_not_a_sample():
    s = parse_line("2026/12/07 02:10:11.250, 1755, 1980, 688.12, 700.00, 63, 0x0000000000000004")
    assert (s.sm_mhz, s.max_sm_mhz, s.power_w, s.power_limit_w, s.temperature_c, s.reasons) == \
        (1755.0, 1980.0, 688.12, 700.0, 63.0, 4)
    assert s.t == pytest.approx(time.mktime((2026, 12, 7, 2, 10, 11, 0, 0, -1)) + 0.25)
    assert parse_line("2026/12/07 02:10:11.250, [N/A], 1980, 688.12, 700.00, 63, 0x0").sm_mhz is None
    assert parse_line("2026/12/07 02:10:11.250, 1500, 300.5", BASIC).power_w == 300.5
    assert parse_line("timestamp, clocks.current.sm [MHz], power.draw [W]", BASIC) is None   # a header
    assert parse_line("2026/12/07 02:10:11.250, 1500") is None                                # cut short
    assert reason_names(0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]


def _log(tmp_path, refuse="none"):
    script = tmp_path / "fake_smi.py"
    script.write_text(FAKE)
    flag = tmp_path / "capped"
    return ClockLog(interval_ms=20, command=[sys.executable, str(script), str(flag), refuse]), flag


def _by_hand(log: ClockLog, name: str) -> list:
    spans = [(a, b) for n, a, b in log.intervals if n == name]
    return [s for s in log.samples if any(a <= s.t <= b for a, b in spans)]


def test_each_call_gets_the_samples_taken_while_it_ran(tmp_path):
    log, flag = _log(tmp_path)
    slow = lambda: time.sleep(0.4)  # noqa: E731

    def capped():
        flag.touch()
        time.sleep(0.4)
        flag.unlink()

    with log:
        for _ in range(2):
            log.timed("uncapped", slow)()
            log.timed("capped", capped)()
    summary = log.summary()
    assert summary["fields"] == list(QUERY) and summary["interval_ms"] == 20
    for name in ("uncapped", "capped"):
        c = summary["calls"][name]
        assert c["calls"] == 2 and c["seconds"] == pytest.approx(0.8, abs=0.2)
        assert c["samples"] == len(_by_hand(log, name)) >= 10
    assert summary["calls"]["uncapped"]["sm_mhz_median"] == 1980
    assert summary["calls"]["capped"]["sm_mhz_median"] == 1500   # edges may catch a line of the other state
    assert summary["calls"]["capped"]["power_capped_share"] > 0.5
    assert "software power cap" in summary["calls"]["capped"]["reasons"]
    assert summary["calls"]["capped"]["power_limit_w"] == 700 and summary["calls"]["capped"]["max_sm_mhz"] == 1980
    assert summary["samples"] >= summary["calls"]["capped"]["samples"] + summary["calls"]["uncapped"]["samples"]
    line = clock_line("capped", summary)
    assert line.startswith("capped: SM 1500 MHz median") and "of 1980" in line and "W of 700" in line
    assert clock_lines({"clocks": summary}).count("\n") == 3


def test_a_refused_field_falls_back_to_the_basic_fields(tmp_path):
    log, _ = _log(tmp_path, refuse="clocks_throttle_reasons.active")
    with log:
        log.timed("call", lambda: time.sleep(0.3))()
    summary = log.summary()
    assert summary["fields"] == list(BASIC)
    assert summary["calls"]["call"]["sm_mhz_median"] == 1980 and "reasons" not in summary["calls"]["call"]


def test_no_nvidia_smi_says_so_and_times_the_call_all_the_same(monkeypatch):
    monkeypatch.setattr(gpu_clocks.shutil, "which", lambda _: None)
    ran = []
    with ClockLog() as log:
        log.timed("call", lambda: ran.append(1))()
    assert ran == [1] and log.summary() == {"unavailable": "nvidia-smi not found on this machine"}
    assert clock_lines({"clocks": log.summary()}) == "\nclocks: none (nvidia-smi not found on this machine)"
    assert clock_lines({}) == ""   # a run from before the log
