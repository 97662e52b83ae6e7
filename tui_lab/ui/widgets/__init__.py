"""The small reusable widgets the panes are made of, one per file."""
