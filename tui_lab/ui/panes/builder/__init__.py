"""The Build pane and what it keeps beside it."""
