"""The baselines our kernel is compared with, used as libraries on our masks: JAX's Splash Attention
(:mod:`~svgtpu.baselines.splash`) and tokamax's maintained splash kernel (:mod:`~svgtpu.baselines.tokamax`)."""
