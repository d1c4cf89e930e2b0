"""Views of :mod:`xlashape.memory`'s model: the terminal report
(:mod:`~xlashape.reporters.text`), the ``--json`` document
(:mod:`~xlashape.reporters.json`), the offline page
(:mod:`~xlashape.reporters.html`) and its pictures
(:mod:`~xlashape.reporters.plot`).

Each is a pure function of the model: it reads what
:func:`xlashape.memory.analyze` returns, opens no input file, imports no
reader, and computes no figure of its own (``tests/test_architecture.py``
checks the imports).
"""
