"""Modal screens: help, save-as, open run."""
