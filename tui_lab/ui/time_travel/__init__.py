"""Time travel through a run's history snapshots, shared by the Attention and Decode panes."""
