"""One table of attention kernels (svgtpu.facts.kernels): every list of kernel names is a view of it."""

import pytest

from svgtpu.attention import svg, svg2
from svgtpu.compiler import variants
from svgtpu.costmodel import compiled, tile_costs
from svgtpu.facts.kernels import KERNELS, kernel_names


def test_every_list_of_kernel_names_is_a_view_of_the_one_table():
    assert svg.KERNELS == ("ours", "splash", "reference")      # what an SVG layer can run its mask through
    assert svg2.KERNELS == ("ours", "reference")               # what takes a mask decided in data
    assert variants.KERNELS == compiled.KERNELS == ("ours", "splash", "tokamax")
    assert tile_costs.ATTENTION_KERNELS == ("ours", "splash", "tokamax", "flash", "cudnn", "flex")   # GPU kernels: measured rates
    # Splash ORs should_not_mask into its mask: no mask-free body; ours and tokamax have one
    assert {k: compiled.HAS_FAST_PATH[k] for k in compiled.KERNELS} == {"ours": True, "splash": False, "tokamax": True}
    assert all(name == k.name and k.what for name, k in KERNELS.items())


def test_an_unknown_flag_is_refused():
    with pytest.raises(ValueError, match="unknown kernel flags"):
        kernel_names(fast=True)
