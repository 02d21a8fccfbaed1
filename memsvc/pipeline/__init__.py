"""The six query stages (one module each), the write path and the reconciler."""
