"""What the lab knows, apart from any widget: ``LabState``, the host protocol panes use, and
the Textual-free state several panes share (time travel, the heads switched off)."""
