"""The Attention pane and what it keeps beside it."""
