"""The benchmark of issue 7 (``tools/bench``): a synthetic log of all four domains, and measurements.

Run from the checkout, never installed: see ``docs/PERFORMANCE.md``.
"""
