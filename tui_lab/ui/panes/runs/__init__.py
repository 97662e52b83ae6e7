"""The Runs pane and what it keeps beside it."""
