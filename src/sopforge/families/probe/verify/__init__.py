"""Everything that proves a PROBE artifact: deterministic checks, LLM judges, the shortcut gate, scorers."""
