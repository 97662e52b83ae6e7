"""The lab's Textual user interface (imports no torch until after the first paint)."""
