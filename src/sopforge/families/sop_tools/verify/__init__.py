"""Everything that proves a sop_tools artifact sound: checks, GX suites, tool and ground-truth harnesses, oracle."""
