"""sopforge.llm."""
