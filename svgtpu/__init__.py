"""svgtpu: Sparse VideoGen attention on TPU, reproduced, tested and explained.

Modules, one concept each: :mod:`~svgtpu.geometry` (video token grids), :mod:`~svgtpu.masks`
(SVG masks and alignment), :mod:`~svgtpu.tiles` (tile classification), and the command line in
:mod:`~svgtpu.cli`.
"""

__version__ = "0.1.0"
