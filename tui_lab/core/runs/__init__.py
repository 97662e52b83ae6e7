"""A run folder on disk: layout, atomic writes, logs, checkpoints, snapshots, status, summaries, curves."""
