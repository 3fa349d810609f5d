"""README's first screen as a new user meets it (system tier: a fresh clone, a fresh venv, then every command of the
first screen in order, each exiting 0: make install, the venv activated, the quick start, make figures, make test;
and svgtpu called as .venv/bin/svgtpu without activating).  Each step runs in ``bash --noprofile --norc`` with only
PATH and HOME from this environment, so nothing of the caller's shell setup helps it."""

import os
import subprocess

import pytest

from svgtpu.facts.paths import REPO_ROOT
from svgtpu.report.first_screen import first_screen_commands


@pytest.mark.system
def test_readmes_first_screen_runs_in_order_in_a_fresh_clone(tmp_path):
    clone = tmp_path / "svgtpu"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    commands = first_screen_commands((clone / "README.md").read_text())
    assert commands[0] == "make install" and commands[-2:] == ["make figures", "make test"], commands
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path))}
    # one shell for them all (source .venv/bin/activate must hold for the commands after it), each checked
    script = "\n".join(f'{c}\nstatus=$?; echo "first screen: exit $status: {c}"; [ $status -eq 0 ] || exit $status'
                       for c in commands)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=3600)
    ran = [line for line in done.stdout.splitlines() if line.startswith("first screen: exit")]
    assert done.returncode == 0 and len(ran) == len(commands), (ran, done.stdout[-3000:], done.stderr[-3000:])
    direct = subprocess.run(["bash", "--noprofile", "--norc", "-c", ".venv/bin/svgtpu info"], cwd=clone, env=env,
                            capture_output=True, text=True, timeout=300)
    assert direct.returncode == 0 and "devices" in direct.stdout, direct.stderr[-2000:]
