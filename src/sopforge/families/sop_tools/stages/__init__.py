"""One module per stage of the sop_tools family: a pure ``run(inputs, *, llm, settings, ...)``."""
