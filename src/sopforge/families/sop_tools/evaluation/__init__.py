"""sop_tools in ``sopforge eval``: the domain as a tool environment, the SOP-Bench agents' tasks,
TELLER's graph reconstruction and execution, TOD-ProcBench tasks 1-3, baselines and the report."""
