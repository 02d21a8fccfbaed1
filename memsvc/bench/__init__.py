"""Benchmarks run by `memsvc bench <name>`: each is a module here with `add_arguments` and `run`."""
