"""``harness compare``: two sides of the results, paired and marked + / ~ / - / x (``compare``), and printed
(``render``)."""
