"""Every input a user hands the package, checked by one schema per kind before any work.

One module per concept: :mod:`~svgtpu.inputs.documents` reads a file the user named (JSON or YAML: no empty,
binary, truncated or duplicate-keyed document gets through; a parser keeps the last of two equal keys, so the
loader refuses them before any validator could see them); :mod:`~svgtpu.inputs.schema` is the base of every schema
(pydantic v2, strict, no unknown keys, no NaN or infinity) and the one error line; then a schema per input kind:
:mod:`~svgtpu.inputs.runs` (the run files ``svgtpu predict --against`` and ``svgtpu paper`` read),
:mod:`~svgtpu.inputs.predictions` (a frozen predictions file), :mod:`~svgtpu.inputs.policy` (a MaxDiffusion
policy YAML), :mod:`~svgtpu.inputs.records` (the compile records and the compiled tile table) and
:mod:`~svgtpu.inputs.environment` (the ``SVGTPU_*`` variables, each checked exactly as the flag it stands for).

A refusal is :class:`svgtpu.errors.BadInput` with one line naming the field, the value and what is allowed;
``svgtpu`` prints it and exits 2.  Nothing here imports JAX.
"""
