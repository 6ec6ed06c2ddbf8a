"""`python -m svcposture.probe`: the probe's command line, and the token-scoped child's entry point."""
import os
import sys

from .command import main

code = main()
# Worker threads still waiting on a slow provider must not hold the exit.
sys.stdout.flush()
os._exit(code)
