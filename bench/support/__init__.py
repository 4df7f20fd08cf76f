"""Code the benches and the tests share that ember itself never runs: the floor's calibration
(``calibrate``), an optional second embedder to measure against (``e5``), and the several
agents the soaks run at once (``load``). Kept out of the package so an installed ember carries
none of it.

Bench scripts put ``bench/`` on the path and import ``support.<module>``; tests import
``bench.support.<module>`` from the repository root.
"""
