"""Concurrent Layer-2 writers (join and set-anchor at once, say) never lose an update."""
import subprocess
import sys

from tests.support.home import REPO

# Run from the checkout (`python -c` imports from its working directory first).
WRITER = """
import sys
from svcposture import config
path, who = sys.argv[1], sys.argv[2]
for j in range(40):
    config.write_layer(path, {"svc.test.w%s_%d" % (who, j): j})
"""


def test_four_processes_writing_one_file_lose_nothing(tmp_path):
    from svcposture import config
    target = tmp_path / "cluster-secrets.json"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(i)], cwd=str(REPO)) for i in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    written = config.load_layer(target)["svc"]["test"]
    assert len(written) == 160
    assert all(written["w%d_%d" % (i, j)] == j for i in range(4) for j in range(40))


def test_type_change_counts_as_a_change(tmp_path):
    from svcposture import config
    target = tmp_path / "node.json"
    config.write_layer(target, {"svc.flag": 1})
    assert config.write_layer(target, {"svc.flag": True}) == {"svc.flag": (1, True)}
    assert config.write_layer(target, {"svc.flag": True}) == {}
