"""``harness compare``: two sides of the results, paired and marked + / ~ / - / x (``compare``), the result's typed
model (``model``), and its table, Markdown and JSON (``render``)."""
