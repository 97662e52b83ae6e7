"""The Train pane and what it keeps beside it."""
