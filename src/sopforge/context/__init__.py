"""The business context: the one stage every family reads, run once per theme.

``model`` (BusinessContext, parsing), ``checks`` (what must hold before any family starts),
``stage`` (the pure ``run()``, TELLER P1 + SOP-Bench business task) and ``shared`` (its
declaration in the flow's DAG).
"""
