"""`call_after_import`: a callback runs right after a module's first import, and the import it waits for is not
forced. Each case runs in a fresh interpreter, where the module has not been imported yet."""
import pathlib
import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_callback_waits_for_the_import_and_runs_before_the_import_statement_returns() -> None:
    out = _run("""
        import sys
        from determined.common.import_hooks import call_after_import, waiting
        calls = []
        call_after_import("json", lambda: calls.append(("first", "json" in sys.modules)))
        call_after_import("json", lambda: calls.append(("second", sys.modules["json"].dumps(1))))
        assert "json" not in sys.modules and waiting("json") and calls == []
        import json.decoder  # a submodule's import executes the package first
        print(calls, waiting("json"), any(type(f).__name__ == "_AfterImport" for f in sys.meta_path))
    """)
    assert out.strip() == "[('first', True), ('second', '1')] False False"


def test_a_module_already_imported_calls_back_at_once() -> None:
    out = _run("""
        import json
        from determined.common.import_hooks import call_after_import, waiting
        calls = []
        call_after_import("json", lambda: calls.append(json.dumps(2)))
        print(calls, waiting("json"))
    """)
    assert out.strip() == "['2'] False"


def test_the_native_api_runner_installs_the_numpy_aliases_only_when_the_script_imports_numpy(
        tmp_path: pathlib.Path) -> None:
    (tmp_path / "script.py").write_text("import sys\nprint('numpy' in sys.modules)\nimport numpy as np\nprint(np.int is int)\n")
    out = _run(f"""
        import os, sys
        os.chdir({str(tmp_path)!r})
        from determined.exec import harness
        harness._run_native_command(["script.py"])
    """)
    assert out.split() == ["False", "True"]


def test_tensorflow_shims_wait_for_tensorflow_without_importing_it() -> None:
    pytest.importorskip("tensorflow")
    out = _run("""
        import sys
        from determined.tensorflow import _tf1_compat
        _tf1_compat.install_when_imported()
        before = "tensorflow" in sys.modules, _tf1_compat._installed
        import tensorflow as tf
        print(before, _tf1_compat._installed, hasattr(tf, "contrib"))
    """)
    assert out.strip() == "(False, False) True True"


def test_installing_the_numpy_aliases_directly_while_the_hook_waits_does_not_deadlock() -> None:
    out = _run("""
        import faulthandler
        faulthandler.dump_traceback_later(60, exit=True)
        from determined import _numpy_compat
        _numpy_compat.install_when_imported()  # as the Native API runner does
        _numpy_compat.install()  # as the trial loader does next: it imports NumPy, which calls the hook
        import numpy as np
        print(np.int is int)
    """)
    assert out.strip() == "True"
