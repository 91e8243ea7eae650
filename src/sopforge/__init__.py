"""sopforge: turn a business theme into a verified, executable SOP benchmark for LLM agents."""

__version__ = "0.1.0"
