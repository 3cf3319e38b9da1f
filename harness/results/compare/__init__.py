"""``harness compare``: two sides of the results, paired, marked + / ~ / - / x (``compare``), and printed (``render``)."""
