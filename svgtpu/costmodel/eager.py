"""The eager PyTorch passes of the published GPU runs' code, counted op by op (docs/costmodel.md, "Eager PyTorch
passes").

The roofline (:func:`svgtpu.costmodel.roofline.forward_ops`) prices the ops around attention as our JAX block runs
them: XLA fuses each into one bfloat16 pass.  A published GPU run ran its repository's PyTorch eagerly: every
elementwise op, cast and copy the code writes is a kernel of its own, reading its inputs and writing its output
over HBM in the dtype the code gives it.  A :class:`CodePath` lists those passes per layer as the source at a cited
commit writes them; :func:`eager_ops` turns them into roofline ops that replace the fused elementwise ones for a
run of that code.  Matmuls and attention are priced as before (their reads and writes are theirs); so are the
cross-attention's K and V over the 512 text tokens (a few hundred tokens against tens of thousands).  Nothing is
fitted: bytes from the count, time at the GPU's HBM bandwidth (:mod:`~svgtpu.costmodel.specs`) and the prior
memory efficiency.

Bytes are per element of the width the pass runs over: ``dim`` (a token's hidden vector), ``ffn`` (the MLP's
inner width), ``head_dim`` (a token's RoPE table, shared by its heads: Wan's and diffusers' ``head_dim / 2``
complex128 values, 8 bytes per ``head_dim`` element; FastVideo's float32 cos and sin) or ``sampled`` (a key's scores
against the rows SVG's profiling samples, every head's: ``heads x rows``).

A code path that runs SVG also lists the work its sparse layers do around the sparse kernel, once per sparse layer
(:attr:`CodePath.profiling`, :attr:`CodePath.layout`; :func:`svg_work_bytes`): eager, memory-bound passes that
replace the pipeline's generic count of profiling and layout transform for that code.  Where a copy depends on strides the count cannot see (a ``transpose(...).flatten(...)`` after a kernel
whose output layout it does not know), it takes the lower reading and says so in ``where``.
"""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.roofline import Op
from svgtpu.costmodel.workload import ModelConfig
from svgtpu.errors import BadInput

WAN = "Wan-Video/Wan2.1@960af87d"
#: The commit that added the SVG README's end-to-end table (its "[feat] Wan I2V, Benchmark", 2025-04-17): the code
#: those rows ran.  It installs diffusers from git (April 2025); diffusers 0.33.1's Wan block and processor make the
#: same passes on a GPU as 0.34.0's (the version 018098ca pins), which the citations name.
SVG = "svg-project/Sparse-VideoGen@95acd8a"
DIFFUSERS = "diffusers 0.34.0 (= 0.33.1's Wan block; PyPI wheels)"
#: The Ulysses all-to-all xDiT's ``xFuserLongContextAttention`` runs (``SeqAllToAll4D``, imported from yunchang).
YUNCHANG = "feifeibear/long-context-attention@0665d0a3"
#: The FastVideo commit the published rows' attention backend is cited at (published.json).
FASTVIDEO = "hao-ai-lab/FastVideo@f572319b"
WIDTHS = ("dim", "ffn", "head_dim", "sampled")


@dataclasses.dataclass(frozen=True)
class Pass:
    """One eager kernel per layer: ``read`` and ``write`` bytes per element of ``width``, ``count`` times a layer
    (q and k each, say); ``sharded``: over the run's sequence shard (False: every rank runs it over all tokens);
    ``i2v``: only where the run conditions on an image (Wan's image cross-attention)."""

    name: str
    read: int
    write: int
    where: str
    width: str = "dim"
    count: int = 1
    sharded: bool = True
    i2v: bool = False

    def __post_init__(self):
        if self.width not in WIDTHS:
            raise BadInput(f"Pass.width must be one of {', '.join(WIDTHS)}, got {self.width!r}")

    def bytes_per_token(self, model: ModelConfig, rows: int = 0) -> float:
        """Bytes per token; ``rows``: the query rows a ``sampled`` pass's scores are per head."""
        return self.count * (self.read + self.write) * {"dim": model.dim, "ffn": model.ffn, "head_dim": model.head_dim,
                                                        "sampled": model.heads * rows}[self.width]


def _rms_norm_wan(weight_bytes: int, where: str) -> tuple[Pass, ...]:
    """Wan's ``WanRMSNorm`` on q and k (``self._norm(x.float()).type_as(x) * self.weight``): the input is bfloat16
    (a linear's output under autocast); a float32 weight promotes the product to float32."""
    out = max(2, weight_bytes)
    return (Pass("rmsnorm x.float()", 2, 4, where, count=2), Pass("rmsnorm pow(2)", 4, 4, where, count=2),
            Pass("rmsnorm mean", 4, 0, where, count=2), Pass("rmsnorm x * rsqrt", 4, 4, where, count=2),
            Pass("rmsnorm type_as", 4, 2, where, count=2), Pass("rmsnorm * weight", 2, out, where, count=2))


def _rope_wan(input_bytes: int, where: str, freqs_full: bool) -> tuple[Pass, ...]:
    """Wan's ``rope_apply`` on q and k: float64, complex multiply, ``cat`` and ``stack`` copies, ``.float()``; its
    frequency table built per call by ``cat`` (the multi-GPU one over the whole sequence on every rank, then padded
    by another ``cat``: ``pad_freqs``)."""
    freqs = ((Pass("rope freqs cat + pad_freqs cat (all tokens, every rank)", 8, 16, where, "head_dim", 2,
                   sharded=False), Pass("rope freqs read by the multiply", 8, 0, where, "head_dim", 2))
             if freqs_full else (Pass("rope freqs cat, read by the multiply", 8, 8, where, "head_dim", 2),))
    return (Pass("rope .to(float64)", input_bytes, 8, where, count=2),
            Pass("rope complex multiply", 8, 8, where, count=2), Pass("rope cat", 8, 8, where, count=2),
            Pass("rope stack", 8, 8, where, count=2), Pass("rope .float()", 8, 4, where, count=2)) + freqs


def _wan_block(weight_bytes: int, multi_gpu: bool) -> tuple[Pass, ...]:
    """Wan 2.1's ``WanAttentionBlock`` under ``autocast(bfloat16)`` with the residual stream in float32 (the gated
    adds run in ``autocast(float32)`` with float32 modulation, so ``x`` is float32 after the first block): one GPU
    holds the float32 checkpoint (``weight_bytes`` 4), FSDP's ``MixedPrecision`` hands the blocks bfloat16 (2)."""
    m, a = f"{WAN} wan/modules/model.py", f"{WAN} wan/modules/attention.py flash_attention"
    x = f"{WAN} wan/distributed/xdit_context_parallel.py"
    y = f"{YUNCHANG} yunchang/comm/all_to_all.py all_to_all_4D"
    attention = ((Pass("half(q), half(k) before xFuser", 4, 2, f"{x} usp_attn_forward", count=2),
                  # each of q, k, v permuted before its all-to-all (the permute after is a no-op at batch 1), the
                  # output permuted before and after its own
                  Pass("Ulysses all-to-all permute copies (q, k, v in; output twice)", 2, 2, y, count=5))
                 if multi_gpu else
                 (Pass("flash q half", 4, 2, a), Pass("flash k cat over k_lens", 4, 4, a), Pass("flash k half", 4, 2, a),
                  Pass("flash v cat over k_lens", 2, 2, a), Pass("flash out .type(float32)", 2, 4, a),
                  Pass("o linear input cast", 4, 2, f"{m} WanSelfAttention.forward (autocast)")))
    cross_q = 4 if weight_bytes == 4 else 2   # the cross q after its RMSNorm: float32 with a float32 weight
    cross = ((Pass("cross flash q half", 4, 2, a), Pass("cross flash out .type(float32)", 2, 4, a),
              Pass("cross o linear input cast", 4, 2, f"{m} WanT2VCrossAttention.forward (autocast)"),
              Pass("i2v image flash q half", 4, 2, a, i2v=True), Pass("i2v image flash out .type", 2, 4, a, i2v=True),
              Pass("i2v x + img_x", 8, 4, f"{m} WanI2VCrossAttention.forward", i2v=True))
             if cross_q == 4 else (Pass("i2v x + img_x", 4, 2, f"{m} WanI2VCrossAttention.forward", i2v=True),))
    b = f"{m} WanAttentionBlock.forward"
    return ((Pass("norm1 layer_norm (float32)", 4, 4, f"{m} WanLayerNorm"),
             Pass("modulate * (1 + e[1])", 4, 4, b), Pass("modulate + e[0]", 4, 4, b),
             Pass("q/k/v linear input cast", 4, 2, f"{m} WanSelfAttention.forward (autocast)", count=3))
            + _rms_norm_wan(weight_bytes, f"{m} WanRMSNorm")
            + _rope_wan(weight_bytes, f"{x if multi_gpu else m} rope_apply", multi_gpu)
            + attention
            + (Pass("gate y * e[2]", 2, 4, b), Pass("residual x + (float32)", 8, 4, b),
               Pass("norm3 layer_norm (float32)", 4, 4, f"{m} WanLayerNorm"),
               Pass("cross q linear input cast", 4, 2, f"{m} WanT2VCrossAttention.forward (autocast)"))
            + tuple(dataclasses.replace(p, count=1) for p in _rms_norm_wan(weight_bytes, f"{m} WanRMSNorm (cross q)"))
            + cross
            + (Pass("residual x + cross (float32)", 6, 4, b),
               Pass("norm2 layer_norm (float32)", 4, 4, f"{m} WanLayerNorm"),
               Pass("modulate * (1 + e[4])", 4, 4, b), Pass("modulate + e[3]", 4, 4, b),
               Pass("ffn linear input cast", 4, 2, f"{b} (autocast)"),
               Pass("gelu (tanh, bfloat16)", 2, 2, f"{b} nn.GELU", "ffn"),
               Pass("gate y * e[5]", 2, 4, b), Pass("residual x + (float32)", 8, 4, b)))


def _diffusers_block(svg: bool = False) -> tuple[Pass, ...]:
    """diffusers' ``WanTransformerBlock`` and ``WanAttnProcessor2_0`` in bfloat16 (``WanPipeline.from_pretrained(...,
    torch_dtype=torch.bfloat16)``), ``FP32LayerNorm`` and the gated adds through float32 temporaries, its ``RMSNorm``
    upcasting; the SDPA output's ``transpose(1, 2).flatten(2, 3)`` counted as a view (lower reading).  ``svg``: SVG's
    processor on the self-attention (:data:`SVG`): q, k and v made contiguous per head, RoPE by its CUDA kernel in
    place (the kernels its README builds), the output's transpose copied; the cross-attention keeps diffusers'."""
    t = f"{DIFFUSERS} models/transformers/transformer_wan.py"
    b, p, n = f"{t} WanTransformerBlock.forward", f"{t} WanAttnProcessor2_0", f"{DIFFUSERS} models/normalization.py"

    def rms(count: int) -> tuple[Pass, ...]:
        w = f"{n} RMSNorm.forward"
        return (Pass("rmsnorm .to(float32)", 2, 4, w, count=count), Pass("rmsnorm pow(2)", 4, 4, w, count=count),
                Pass("rmsnorm mean", 4, 0, w, count=count), Pass("rmsnorm x * rsqrt (float32)", 2, 4, w, count=count),
                Pass("rmsnorm .to(weight.dtype)", 4, 2, w, count=count), Pass("rmsnorm * weight", 2, 2, w, count=count))

    s = f"{SVG} svg/models/wan/attention.py WanAttn_SparseAttn_Processor2_0"
    rope = ((Pass("q, k, v transpose(1, 2).contiguous()", 2, 2, f"{s}.get_transpose_qkv", count=3),
             Pass("rope in place (SVG's CUDA kernel)", 2, 2, f"{SVG} svg/models/wan/attention.py apply_rotary_emb",
                  count=2),
             Pass("output transpose(1, 2).flatten(2, 3) (copy)", 2, 2, f"{s}.get_o")) if svg else
            (Pass("rope .to(float64)", 2, 8, f"{p} apply_rotary_emb", count=2),
             Pass("rope complex multiply", 8, 8, f"{p} apply_rotary_emb", count=2),
             Pass("rope freqs read by the multiply", 8, 0, f"{p} apply_rotary_emb", "head_dim", 2),
             Pass("rope .type_as (bfloat16)", 8, 2, f"{p} apply_rotary_emb", count=2)))
    norm = f"{n} FP32LayerNorm"
    return ((Pass("hidden_states.float()", 2, 4, b, count=3), Pass("layer_norm (float32)", 4, 4, norm, count=3),
             Pass("modulate * (1 + scale)", 4, 4, b, count=2), Pass("modulate + shift", 4, 4, b, count=2),
             Pass("norm .type_as (bfloat16)", 4, 2, b, count=3))
            + rms(3) + rope
            + (Pass("residual + cross (bfloat16)", 4, 2, b),
               Pass("gelu (tanh, bfloat16)", 2, 2, f"{DIFFUSERS} models/activations.py GELU", "ffn"),
               Pass("gated add hidden_states.float()", 2, 4, b, count=2), Pass("ff_output.float()", 2, 4, b),
               Pass("attn_output * gate (float32)", 2, 4, b), Pass("ff_output * gate (float32)", 4, 4, b),
               Pass("gated add + (float32)", 8, 4, b, count=2), Pass("gated add .type_as (bfloat16)", 4, 2, b, count=2)))


def _fastvideo_block() -> tuple[Pass, ...]:
    """FastVideo's ``WanTransformerBlock`` in bfloat16 on one GPU (:data:`FASTVIDEO`): ``FP32LayerNorm`` and
    modulation to bfloat16, its ``RMSNorm`` through ``forward_native`` (``CustomOp.dispatch_forward`` always takes
    it), RoPE through ``_apply_rotary_emb`` (GPT-J style: each half upcast, multiplied and cast back, then
    ``stack``), ``DistributedAttention``'s ``torch.cat([q, k, v])`` (its all-to-all a no-op on one GPU), and the
    gated residuals fused with the next norm in ``ScaleResidualLayerNormScaleShift`` as eager ops (float32 until
    their ``.to(orig_dtype)``); no ``torch.compile`` (its default)."""
    m, n = f"{FASTVIDEO} fastvideo/models/dits/wanvideo.py WanTransformerBlock.forward", \
        f"{FASTVIDEO} fastvideo/layers/layernorm.py"
    r, rope = f"{n} RMSNorm.forward_native", f"{FASTVIDEO} fastvideo/layers/rotary_embedding.py _apply_rotary_emb"
    sr = f"{n} ScaleResidualLayerNormScaleShift.forward"
    return (Pass("hidden_states.float()", 2, 4, m), Pass("norm1 layer_norm (float32)", 4, 4, f"{n} FP32LayerNorm"),
            Pass("modulate * (1 + scale)", 4, 4, m), Pass("modulate + shift", 4, 4, m),
            Pass("modulate .to(orig_dtype)", 4, 2, m),
            Pass("rmsnorm .to(float32)", 2, 4, r, count=3), Pass("rmsnorm pow(2)", 4, 4, r, count=3),
            Pass("rmsnorm mean", 4, 0, r, count=3), Pass("rmsnorm x * rsqrt", 4, 4, r, count=3),
            Pass("rmsnorm .to(orig_dtype)", 4, 2, r, count=3), Pass("rmsnorm * weight", 2, 2, r, count=3),
            # bytes per element of q or k, each op over one half (x[..., ::2] or x[..., 1::2]) of q and of k: a
            # half's .float() (1 + 2), four per tensor; a product by cos or sin (2 + 2), four; the - and the +
            # (4 + 2), two; .type_as (2 + 1), two; and stack (2 + 2) once per tensor
            Pass("rope halves .float()", 1, 2, rope, count=8), Pass("rope products by cos, sin", 2, 2, rope, count=8),
            Pass("rope - and +", 4, 2, rope, count=4), Pass("rope .type_as", 2, 1, rope, count=4),
            Pass("rope stack", 2, 2, rope, count=2),
            Pass("rope cos, sin read by the products (float32)", 8, 0, rope, "head_dim", 2),
            Pass("torch.cat([q, k, v])", 2, 2, f"{FASTVIDEO} fastvideo/attention/layer.py DistributedAttention.forward",
                 count=3),
            Pass("self residual x * gate (float32)", 2, 4, sr), Pass("self residual + (float32)", 6, 4, sr),
            Pass("cross norm layer_norm (float32)", 4, 4, f"{n} FP32LayerNorm"),
            Pass("self modulate * (1 + 0) + 0 (float32)", 4, 4, sr, count=2),
            Pass("self .to(orig_dtype) of both outputs", 4, 2, sr, count=2),
            Pass("cross residual x * 1 + (bfloat16)", 2, 2, sr), Pass("cross residual +", 4, 2, sr),
            Pass("ffn norm inputs.float()", 2, 4, f"{n} FP32LayerNorm"),
            Pass("ffn norm layer_norm (float32)", 4, 4, f"{n} FP32LayerNorm"),
            Pass("ffn norm .to(bfloat16)", 4, 2, f"{n} FP32LayerNorm"),
            Pass("cross modulate * (1 + scale) (float32)", 2, 4, sr), Pass("cross modulate + shift", 4, 4, sr),
            Pass("cross modulate .to(orig_dtype)", 4, 2, sr),
            Pass("gelu (tanh, bfloat16)", 2, 2, f"{FASTVIDEO} fastvideo/layers/activation.py", "ffn"),
            Pass("mlp residual x * gate (float32)", 2, 4, f"{n} ScaleResidual"),
            Pass("mlp residual + (float32)", 6, 4, f"{n} ScaleResidual"),
            Pass("mlp residual .to(orig_dtype)", 4, 2, m))


@dataclasses.dataclass(frozen=True)
class CodePath:
    """A published run's code: its passes per layer and whether it re-casts float32 weights per call (autocast
    caches no cast of a parameter that does not require grad: Wan's ``requires_grad_(False)`` model pays each
    matmul weight's float32 read and bfloat16 write at every call)."""

    name: str
    what: str
    passes: tuple[Pass, ...]
    weight_cast: bool = False
    profiling: tuple[Pass, ...] = ()   # per sparse layer: SVG's online profiling, as the code runs it
    layout: tuple[Pass, ...] = ()      # per sparse layer: its buffers and layout copies around the sparse kernel

    def bytes_per_token(self, model: ModelConfig, image: bool = False) -> float:
        """Bytes per token per layer (every pass over all its tokens)."""
        return sum(p.bytes_per_token(model) for p in self.passes if image or not p.i2v)


def _svg1_sparse_layer() -> dict[str, tuple[Pass, ...]]:
    """SVG's own work in one sparse layer at :data:`SVG` (``attention_core_logic``), every head, bfloat16.

    Profiling (``sample_mse``): the sampled queries' scores against every key, ``Q_s K^T`` (reads K) divided by
    ``sqrt(d)`` and softmaxed, then ``P V`` (reads V): the golden rows; per candidate mask (two: spatial, temporal)
    ``masked_fill``, softmax and ``P V`` again.  K once, V three times, 16 passes over the sampled scores; the gathered
    rows and the per-layer boolean mask rows (not per head) are left out.  Layout: four ``zeros_like`` fills (the
    output and the three placement targets), the placement kernel's copy of Q, K and V of every head (spatial heads
    are copied as they are, temporal ones permuted) and the output's copy back."""
    a, pl = f"{SVG} svg/models/wan/attention.py", f"{SVG} svg/models/wan/placement.py"
    m = f"{a} sample_mse"
    profiling = (Pass("Q_s K^T reads K", 2, 0, m), Pass("Q_s K^T writes the scores", 0, 2, m, "sampled"),
                 Pass("/ sqrt(d)", 2, 2, m, "sampled"), Pass("softmax", 2, 2, m, "sampled"),
                 Pass("golden P V reads P and V", 2, 0, m, "sampled"), Pass("golden P V reads V", 2, 0, m),
                 Pass("masked_fill per mask", 2, 2, m, "sampled", 2), Pass("softmax per mask", 2, 2, m, "sampled", 2),
                 Pass("P V per mask reads P", 2, 0, m, "sampled", 2), Pass("P V per mask reads V", 2, 0, m, count=2))
    layout = (Pass("zeros_like: output, query_out, key_out, value_out", 0, 2, f"{a} attention_core_logic", count=4),
              Pass("placement copies Q, K, V of every head", 2, 2, f"{pl} wan_sparse_head_placement_kernel", count=3),
              Pass("output placement copies O of every head", 2, 2, f"{pl} wan_hidden_states_placement_kernel"))
    return {"profiling": profiling, "layout": layout}


def svg_work_bytes(path: CodePath, model: ModelConfig, L: int, rows: int) -> dict[str, float] | None:
    """Bytes one sparse layer of ``path`` moves around its sparse kernel over ``L`` tokens, every head, with ``rows``
    profiled rows a head: ``{"profiling": ..., "layout": ...}``, or ``None`` for a path that runs no SVG."""
    if not path.profiling:
        return None
    return {k: L * sum(p.bytes_per_token(model, rows) for p in passes)
            for k, passes in (("profiling", path.profiling), ("layout", path.layout))}


CODE_PATHS = {p.name: p for p in (
    CodePath("wan-reference", f"{WAN} generate.py on one GPU: the float32 checkpoint under autocast(bfloat16)",
             _wan_block(4, multi_gpu=False), weight_cast=True),
    CodePath("wan-usp-fsdp", f"{WAN} generate.py with --ulysses_size and --dit_fsdp: xdit usp_attn_forward, "
             "FSDP's bfloat16 parameters", _wan_block(2, multi_gpu=True)),
    CodePath("diffusers", f"{DIFFUSERS}: Wan's transformer in bfloat16 (SVG's dense baseline, {SVG} "
             "wan_t2v_inference.py --pattern dense)", _diffusers_block()),
    CodePath("svg-processor", f"{SVG}: diffusers' block with SVG's self-attention processor "
             "(wan_t2v_inference.py --pattern SVG)", _diffusers_block(svg=True), **_svg1_sparse_layer()),
    CodePath("fastvideo", f"{FASTVIDEO}: FastVideo's Wan DiT in bfloat16 on one GPU, eager", _fastvideo_block()),
)}


def code_path(name: str) -> CodePath:
    if name not in CODE_PATHS:
        raise BadInput(f"code_path must be one of {', '.join(CODE_PATHS)}, got {name!r}")
    return CODE_PATHS[name]


def eager_ops(ops: list[Op], model: ModelConfig, L: int, path: CodePath, chips: int = 1,
              image: bool = False) -> list[Op]:
    """``ops`` (a :func:`~svgtpu.costmodel.roofline.forward_ops` list) with its fused elementwise ops replaced by
    ``path``'s passes over ``L`` tokens, one op per pass (all layers); a pass every rank runs over all tokens is
    counted ``chips`` times, as :func:`~svgtpu.costmodel.roofline.op_seconds` divides by the chips; with
    ``weight_cast``, every matmul weight read in float32 and written in bfloat16 per call."""
    per_layer: dict[str, float] = {}   # passes of one name (the cross q's RMSNorm beside q's and k's) together
    for p in path.passes:
        if image or not p.i2v:
            per_layer[p.name] = per_layer.get(p.name, 0.0) + p.bytes_per_token(model) * (L if p.sharded else L * chips)
    out = [op for op in ops if op.kind != "elementwise"]
    out += [Op(f"eager: {name}", "elementwise", bytes=b, count=model.layers) for name, b in per_layer.items()]
    if path.weight_cast:
        weights = sum(op.widths[0] * op.widths[1] * op.count for op in ops if op.kind == "matmul")
        out.append(Op("eager: weight cast float32 -> bfloat16 per call", "elementwise", bytes=6.0 * weights))
    return out


__all__ = ["Pass", "CodePath", "CODE_PATHS", "code_path", "eager_ops", "svg_work_bytes"]
