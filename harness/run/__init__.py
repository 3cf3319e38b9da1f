"""Stage 10, run control: one train-then-evaluate run from plan to recorded row, and its re-runs.

``plan`` (which phases run, pure), ``planning`` (what a profile can detect before it runs: ``harness power``, the
figure of ``harness validate`` and of a run), ``signal_forecast`` (the share of GRPO groups expected to differ in
the task's reward, from the recorded baseline), ``runner`` (the phases; it emits ``events``, a ``reporter`` prints
them), ``settings`` (a run's rollout settings), ``seeds`` (several seeds: which, one run each, pooled), ``state``
(the typed ``run-state.json``), ``resume`` (continuing an interrupted run), ``record`` (row, outcomes and manifest
into the results store), ``reproduce`` (a recorded run again at its commit), ``provenance`` (git state, packages,
folder hashes), ``memory`` (peak memory of the process tree), ``interrupts`` (Ctrl-C and SIGTERM), ``cli`` (the
``power`` command). A run's options are :mod:`harness.spec.options`; its manifest is
:mod:`harness.results.store.manifest`.
"""
