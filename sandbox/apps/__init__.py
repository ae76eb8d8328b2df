"""The apps layer: programs that run on the sandbox.

What belongs here: the ``python -m sandbox`` command line (``cli``), the demo (``demo``), the
benchmarks (``bench``, ``make bench``), the fleet simulation (``simulate``, ``make simulate``) and the
generated docs (``docgen``, ``make docs``). None of them is a part of the sandbox another part needs.

What it may import: anything below it (``sandbox.harness``, ``sandbox.services``,
``sandbox.emulator``). Nothing imports an app but another app and ``sandbox/__main__.py``
(tests/unit/test_import_cycles.py holds it).
"""
