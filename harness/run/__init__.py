"""Stage 9, run control: one train-then-evaluate run from plan to recorded row, and its re-runs.

``options`` (what was asked), ``plan`` (which phases run, pure), ``runner`` (the phases), ``state`` (the typed
``run-state.json``), ``resume`` (continuing an interrupted run), ``manifest`` (the typed, versioned provenance
manifest), ``record`` (row, outcomes and manifest into the results store), ``reproduce`` (a recorded run again at its
commit), ``provenance`` (git state, packages, folder hashes), ``memory`` (peak memory of the process tree),
``interrupts`` (Ctrl-C and SIGTERM).
"""
