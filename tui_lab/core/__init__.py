"""The lab's core: pure PyTorch + PyYAML. Never imports textual or rich."""
