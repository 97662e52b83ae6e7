"""The lab's panes and the widgets they are made of, one per file."""
