"""The constants of unigraph's counter-based random numbers (splitmix64), shared by the numba
sampling kernels (``unigraph.kernels.sampling``) and the torch code that defines the generator
(``unigraph.sampling.counter_rng``, which documents it). They live here, below both, so that
kernels import nothing from the layers above them."""
GOLDEN = 0x9E3779B97F4A7C15          # 2**64 / golden ratio, odd
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
TWO_POW_MINUS_53 = 1.0 / (1 << 53)
