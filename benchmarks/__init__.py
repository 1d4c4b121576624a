"""Benchmarks: scripts that measure the harness against the scripted model server and print figures.

Run one from the repository's top folder, e.g. `python -m benchmarks.context`.
"""
