"""PROBE exports: one JSON per sample, JSONL/Parquet of all samples, metadata with Table 1 statistics."""
