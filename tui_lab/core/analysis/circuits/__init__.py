"""Attribution graphs over transcoders: the local replacement model, `attribute`, pruning and scores, circuit-tracer's graph file."""
