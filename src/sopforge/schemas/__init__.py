"""Pydantic models of every sopforge artifact; JSON Schemas in top-level schemas/ are generated from them."""
