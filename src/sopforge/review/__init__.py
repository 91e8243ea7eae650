"""Review gates: what a reviewer can decide about a stage's artifact, and how it is applied.

``decision`` is the form the Prefect UI shows on a paused run; ``edits`` re-validates an edited
artifact with the same checks generated ones pass; ``gate`` applies a decision to the store;
``submit`` is the headless (``sopforge review``) way to answer a paused run.
"""
