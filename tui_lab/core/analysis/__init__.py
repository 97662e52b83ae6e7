"""Looking inside a model, by topic: heads, patching, lenses and the tutorials' basics."""
