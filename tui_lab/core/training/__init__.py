"""The training loop, its schedule, evaluation, events, torchrun and the trainer child process."""
