"""The one float64 attention every test compares against: :func:`svgtpu.kernels.reference.float64_attention`
(numpy, straight from the definition; the GPU run checks its kernel against the same function).

Import it as ``from float64_reference import masked_attention, relative_error``: pytest puts
``tests/`` on ``sys.path`` (it holds the root ``conftest.py``).
"""

from svgtpu.kernels.reference import float64_attention as masked_attention
from svgtpu.kernels.reference import relative_error

__all__ = ["masked_attention", "relative_error"]
