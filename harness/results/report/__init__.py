"""``harness report``: an HTML and Markdown report with plots (``report``: what goes in; ``plots``; ``document``: the
format-neutral document)."""
