"""Account posture, quota events and cluster liveness for one node."""

__all__ = [
    "__version__",
    "ConfigError",
    "EventLogError",
    "LatchError",
]

# Only the light, I/O-free modules are imported here: `import svcposture` must
# stay fast and must not pull in http.server or urllib.
from ._version import __version__
from .config import ConfigError
from .events import EventLogError
from .latch import LatchError
