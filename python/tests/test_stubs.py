"""The type stubs (``ruleweave/_ruleweave.pyi``) held to the installed module by mypy's
stubtest: every name, signature and class the stubs declare is what the module has, and the
reverse. A stub that drifts from the module fails here."""

import pathlib
import shutil
import subprocess
import sys

import ruleweave


def stubtest(cwd: pathlib.Path, mypypath: str = "") -> subprocess.CompletedProcess:
    env = {"MYPYPATH": mypypath, "PATH": ""}
    return subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "ruleweave"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_stubs_are_the_module(tmp_path: pathlib.Path) -> None:
    done = stubtest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 2 modules" in done.stdout


def test_a_stub_that_drifts_is_found(tmp_path: pathlib.Path) -> None:
    # The package's stubs with `Session.view` dropped, found first on MYPYPATH.
    package = pathlib.Path(ruleweave.__file__).parent
    stubs = tmp_path / "stubs" / "ruleweave"
    stubs.mkdir(parents=True)
    shutil.copy(package / "__init__.py", stubs / "__init__.pyi")
    text = (package / "_ruleweave.pyi").read_text()
    drifted = text.replace("    def view(self) -> Dict[str, Any]:", "    def gone(self) -> Dict[str, Any]:")
    assert drifted != text
    (stubs / "_ruleweave.pyi").write_text(drifted)
    done = stubtest(tmp_path, str(tmp_path / "stubs"))
    assert done.returncode == 1, done.stdout
    assert "ruleweave._ruleweave.Session.view is not present in stub" in done.stdout
