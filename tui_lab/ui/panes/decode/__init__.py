"""The Decode pane and what it keeps beside it."""
