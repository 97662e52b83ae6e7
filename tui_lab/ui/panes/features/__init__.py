"""The Features pane: sparse autoencoders on a hook, trained live and browsed feature by feature."""
