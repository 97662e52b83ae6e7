"""The model in hand: every way a model comes into the lab (a run, a history step, files) and the handle it is seen through."""
