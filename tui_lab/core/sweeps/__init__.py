"""Grids of runs over settings and seeds: spec, runner, record, statistics."""
