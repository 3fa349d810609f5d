"""The toy DiT's attention timed per length (svgtpu.bench.cpu): every length in each round, refusals in one line."""

import numpy as np
import pytest

from svgtpu.bench.cpu import toy_attention_scaling
from svgtpu.toy.dit import DiTConfig


def test_toy_attention_scaling_times_every_length_in_each_round():
    configs = [DiTConfig(frames=1), DiTConfig(frames=2)]
    out = toy_attention_scaling(configs, rounds=3)
    assert out["L"] == [c.geometry.L for c in configs] and out["L"][1] == 2 * out["L"][0]
    assert [len(r) for r in out["rounds"]] == [3, 3] and min(min(r) for r in out["rounds"]) > 0
    assert out["median_seconds"] == [float(np.median(r)) for r in out["rounds"]]
    assert out["provenance"].startswith("measured")


def test_toy_attention_scaling_refuses_one_length_and_no_rounds():
    with pytest.raises(ValueError, match="at least two different lengths"):
        toy_attention_scaling([DiTConfig(frames=1), DiTConfig(frames=1)], rounds=2)
    with pytest.raises(ValueError, match="rounds"):
        toy_attention_scaling([DiTConfig(frames=1), DiTConfig(frames=2)], rounds=0)
