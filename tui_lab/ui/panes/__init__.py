"""The lab's panes, one module each (Build, Train, Decode, Attention, Params)."""
