"""Looking inside a model: head scores and probes, ablation, importance, logit lens, walkthrough."""
