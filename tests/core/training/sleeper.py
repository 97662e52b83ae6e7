"""A module for ``test_fork_server``: says it is ready, then waits for a signal."""

import time

print("ready", flush=True)
time.sleep(60)
