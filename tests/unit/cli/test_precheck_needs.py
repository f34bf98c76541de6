"""What an example needs beyond the first install, said in one line when it is missing: the SLURM
launcher (the [slurm] extra), a SLURM installation for scripts/slurm-local.sh status, and MQM
files (the fix first, a few of the paths looked at)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from cscore.tests.support import REPO

REPO = REPO

# the cscore command in an interpreter whose hydra_plugins namespace is an empty folder: Hydra's
# submitit launcher is not installed there, for every way of importing or scanning for it
WITHOUT_LAUNCHER = """
import sys
import hydra_plugins
hydra_plugins.__path__ = [sys.argv.pop(1)]
from cscore.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("launcher", ["slurm", "slurm_warm"])
def test_the_slurm_launcher_missing_is_one_line_with_the_install_command(launcher, tmp_path):
    plugins = tmp_path / "no_plugins"
    plugins.mkdir()
    res = subprocess.run([sys.executable, "-c", WITHOUT_LAUNCHER, str(plugins), "run", "-m",
                          f"hydra/launcher={launcher}", "method.gamma=0.1,0.2"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"cscore: error: hydra/launcher={launcher} needs Hydra's submitit launcher, which is not installed: "
        "pip install 'cscore[slurm]' (hydra-submitit-launcher==1.2.0)"]
    assert not (tmp_path / "multirun").exists() and not (tmp_path / "outputs").exists()


def test_slurm_local_status_without_slurm_is_one_line(tmp_path):
    """PATH holds only what the script needs besides SLURM (no scontrol, sinfo, squeue)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("hostname", "date"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    res = subprocess.run([shutil.which("bash"), str(REPO / "scripts" / "slurm-local.sh"), "status"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env={"PATH": str(bin_dir)})
    assert res.returncode == 1 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "SLURM is not installed here (no scontrol on PATH)" in lines[0], res.stderr
    assert "slurm-local.sh start --allow-system-changes" in lines[0]


def test_missing_mqm_files_put_the_fix_first_and_count_the_rest(tiny_dirs, tmp_path, cscore_main):
    """data=mqm23 reads three language pairs; a root holding only zh-en names that pair in the fix
    and three of the 27 paths looked at (en-de: 7 published names, he-en: 2, each plain, .gz and .tar.gz)."""
    root = tmp_path / "mqm"
    (root / "generalMT2023" / "zhen").mkdir(parents=True)
    (root / "generalMT2023" / "zhen" / "mqm_generalMT2023_zhen.tsv").write_text("")
    res = cscore_main("run", "data=mqm23", f"data.root={root}", f"pair.expert.path={tiny_dirs.expert}",
                      "method=single", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert res.returncode == 2  # a data-input mistake (docs/concepts.md, Exit codes)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert line.startswith("cscore: error: mqm23: missing MQM file(s) for en-de, he-en: score the pairs found with "
                           "'data.pairs=[zh-en]', or point each missing pair at its file with "
                           "data.paths.<xx-yy>=<file>. Looked for "), line
    assert line.count(str(root)) == 3 and line.endswith(" (+24 more)"), line
    assert not (tmp_path / "r").exists()
