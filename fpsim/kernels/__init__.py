"""The numerics, written once.

Every function here is branch-free scalar code over a handful of primitives
(``select``, ``maximum``, bit casts, ...). A backend instantiates the same
source with its own primitives: NumPy runs it on whole arrays, Numba compiles
it per element inside parallel loops (see ``fpsim.backends._instantiate``).
Hence the rules: no ``if`` on element values, integers in int64 (random
streams in uint64), shift counts kept in 0..63.
"""
