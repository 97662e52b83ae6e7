"""The Params pane and what it keeps beside it."""
