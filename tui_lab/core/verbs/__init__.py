"""One verb layer: each thing the lab does, as a frozen request and ``run(request, model,
progress, cancelled) -> result`` with ``to_json()``; the command line and the panes both call it."""
