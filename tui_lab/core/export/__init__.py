"""Lab runs written the other way: a folder transformers loads with no custom code."""
