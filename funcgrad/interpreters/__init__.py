"""One trace type per module: reverse (vjp), forward (jvp), batching (vmap), tracing to IR (jit)."""
