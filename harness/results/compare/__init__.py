"""``harness compare``: two sides of the results, paired and marked + / ~ / - / x (``compare``), what the
replicates are, tasks or training seeds, and what a ``~`` could have told (``units``), the result's typed model
(``model``), and its table, Markdown and JSON (``render``)."""
