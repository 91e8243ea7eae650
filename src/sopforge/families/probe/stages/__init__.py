"""PROBE stages: one pure ``run()`` per stage (no store, no Prefect)."""
