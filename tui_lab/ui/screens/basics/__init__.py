"""The basics screen (``b``): the tutorials' pictures drawn from the lab's own model."""
