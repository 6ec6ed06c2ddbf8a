"""`python -m svcposture.probe`: the probe's command line, and the token-scoped child's entry point."""
import sys

from .command import main

# The exchanges still waiting on a slow provider run on daemon threads (probe.workers): they do not hold the exit.
sys.exit(main())
