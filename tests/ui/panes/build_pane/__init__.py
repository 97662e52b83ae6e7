"""Tests of ``tui_lab/ui/panes/builder/`` (a folder named ``build`` is one pytest never collects)."""
