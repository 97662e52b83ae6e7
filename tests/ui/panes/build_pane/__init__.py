"""Tests of ``tui_lab/ui/panes/build/`` (a folder named ``build`` is one pytest never collects)."""
