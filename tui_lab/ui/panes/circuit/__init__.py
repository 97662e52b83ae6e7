"""The Circuit pane: an attribution graph over transcoders, its nodes by layer and position."""
