"""sopforge.orchestration."""
