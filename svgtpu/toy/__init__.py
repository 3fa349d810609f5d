"""The toy Wan-shaped video DiT that runs on two CPU cores: data, model, training, sampling, fidelity.

- :mod:`~svgtpu.toy.data`: synthetic video (shapes bouncing over a static mosaic);
- :mod:`~svgtpu.toy.dit`: the model, readable in one sitting; :mod:`~svgtpu.toy.train`: rectified flow;
- :mod:`~svgtpu.toy.sampler`: Euler sampling with CFG; :mod:`~svgtpu.toy.quality`: PSNR, SSIM, dense vs sparse.
"""
