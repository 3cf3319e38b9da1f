"""Result storage: the typed rows, their file formats and checksums, atomic appends, and reading any revision.

``schema`` (RunRow, TaskOutcome), ``manifest`` (the typed, versioned manifest), ``upgrade`` (format versions),
``codec`` (CSV/JSON <-> validated rows),
``checksums`` / ``verify`` (every file against its checksum), ``atomic`` (crash-safe writes), ``layout`` (file names),
``tree`` / ``git`` (the working tree or a git revision), ``reader`` (one snapshot), ``store`` (ResultStore),
``sources`` (the sides a comparison reads: worktree, revision, code at a revision, run ids).
"""
