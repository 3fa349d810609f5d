"""Provenance labels are derived from where a number came from, in one function."""

import jax
import pytest

from svgtpu.facts import results
from svgtpu.kernels.common import resolve_interpret


def test_labels_follow_the_source_backend_and_execution_mode():
    assert jax.default_backend() == "cpu"          # the suite runs on CPU (JAX_PLATFORMS=cpu)
    assert results.provenance("computed") == "computed"
    assert results.provenance("modeled", device="v6e") == "modeled-v6e"
    assert results.provenance("compiled", device="v6e") == "compiled-v6e"
    assert results.provenance("measured") == "measured-cpu"                       # plain XLA
    assert results.provenance("measured", interpret=True) == "measured-cpu-interpret"  # our kernels, interpret
    # the caller resolves the kernels' mode: off a TPU, None means interpret
    assert results.provenance("measured", interpret=resolve_interpret(None)) == "measured-cpu-interpret"
    assert results.provenance("measured", interpret=resolve_interpret(False)) == "measured-cpu"
    for label in ("computed", "modeled-v6e", "compiled-v6e", "measured-cpu", "measured-cpu-interpret"):
        assert results.check_provenance(label) == label


def test_a_gpu_backend_is_labelled_with_its_device(monkeypatch):
    class H200:
        device_kind = "NVIDIA H200"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(jax, "devices", lambda *a: [H200()])
    assert results.provenance("measured", interpret=True) == "measured-gpu-h200"
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert results.provenance("measured", interpret=True) == "measured-tpu"


@pytest.mark.parametrize("kwargs, word", [
    ({"source": "guessed"}, "source"), ({"source": "modeled"}, "device"),
    ({"source": "compiled", "device": "V6E!"}, "device")])
def test_bad_sources_are_clear_errors(kwargs, word):
    with pytest.raises(ValueError, match=word):
        results.provenance(**kwargs)
