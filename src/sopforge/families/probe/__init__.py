"""The PROBE family (seeds/004): proactive bottleneck samples hidden in a persona's emails, calendar
and documents, every document verified; declared in :mod:`sopforge.families.probe.family`."""
