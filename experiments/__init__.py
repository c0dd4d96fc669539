"""The studies of ``fpsim reproduce``, one module per study (installed as
``fpsim.experiments``). Each has NAME and TITLE, ``needs(session)`` (the training runs
it reads), ``run(session)`` (its result, JSON-ready), ``figures(result, out)`` (PNG
files written) and ``markdown(result, files)`` (its section of results.md); run one
alone with ``python experiments/NAME.py`` or ``fpsim reproduce --only NAME``."""
