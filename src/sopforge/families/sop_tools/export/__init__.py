"""Exports of a finished benchmark.

- ``sopbench``: the SOP-Bench folder (``write_sopbench_folder``), written atomically and
  re-validated with ``sopforge.audit``;
- ``tables``: tasks as JSONL / Parquet with full provenance;
- ``metadata``: counts like SOP-Bench Table 3 and TELLER Table 4;
- ``cells``: CSV cell writing that pandas reads back unchanged.
"""
