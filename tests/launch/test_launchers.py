"""The launchers of `determined.launch`, run as a script entrypoint runs them: real processes, in the environment
the harness gives a trial's container (no master is needed: nothing here reports)."""
import io
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Dict, List

import pytest

from determined import core
from determined.core import _info
from determined.exec.launch import read_lines
from determined.launch import deepspeed, horovod, torch_distributed

PY = sys.executable
SHOW_ENV = "import os; print(' '.join(k + '=' + os.environ.get(k, '-') for k in %r), flush=True)"
TORCHRUN_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                 "ROLE_RANK", "MASTER_ADDR", "DET_CHIEF_IP", "USE_TORCH_DISTRIBUTED", "TORCHELASTIC_RUN_ID",
                 "CUDA_VISIBLE_DEVICES"]


def container_env(slots: List[int], rank: int = 0, counts: "List[int] | None" = None, **extra: str) -> Dict[str, str]:
    """The environment of one container of a trial's run (container `rank` of len(counts))."""
    counts = counts or [len(slots)]
    run = {"DET_MASTER": "http://127.0.0.1:9", "DET_ALLOCATION_ID": "alloc-1", "DET_SLOT_IDS": json.dumps(slots),
           "DET_CONTAINER_ADDRS": json.dumps(["127.0.0.1"] * len(counts)), "DET_CONTAINER_RANK": str(rank),
           "DET_CONTAINER_SLOT_COUNTS": json.dumps(counts), "CUDA_VISIBLE_DEVICES": ""}
    answer = {"trial_id": 4, "experiment_id": 2, "config": {"searcher": {"metric": "loss"}}, "hparams": {},
              "trial_seed": 1}
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "C10D_PORT", "DET_CHIEF_PORT", "TF_CONFIG"):
        env.pop(name, None)
    env.update(run)
    env.update(_info.trial_environment(core.ClusterInfo._from_answer(answer, environ=run)))
    env.update(extra)
    return env


def launch(module: str, args: List[str], env: Dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", f"determined.launch.{module}", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_lines_end_at_newlines_and_carriage_returns() -> None:
    data = b"plain\r\n\rprogress 10%\rprogress 20%\n\nlast"
    assert list(read_lines(io.BytesIO(data))) == [b"plain\n", b"progress 10%\n", b"progress 20%\n", b"\n", b"last\n"]
    long = list(read_lines(io.BytesIO(b"x" * 20000 + b"\n")))
    assert [len(line) for line in long] == [8192, 8192, 3619]


def test_wrap_rank_prefixes_each_line_and_keeps_the_status() -> None:
    script = "import sys; print('out'); sys.stderr.write('err 1\\rerr 2\\n'); sys.exit(3)"
    proc = launch("wrap_rank", ["NOT_SET,MY_RANK", "--", "python3", "-c", script], dict(os.environ, MY_RANK="5"))
    assert proc.returncode == 3
    assert proc.stdout == "[rank=5] out\n" and proc.stderr == "[rank=5] err 1\n[rank=5] err 2\n"
    bad = launch("wrap_rank", ["NOT_SET", "true"], dict(os.environ))
    assert bad.returncode == 2 and "none of the environment variables NOT_SET is set" in bad.stderr


def test_torch_distributed_gives_each_slot_a_worker_with_torchruns_environment(tmp_path: pathlib.Path) -> None:
    # rank 1 fails with 7 once rank 0 has printed (else rank 0 could be stopped before it prints)
    script = SHOW_ENV % (TORCHRUN_KEYS,) + (
        "; import os, pathlib, sys, time; marker = pathlib.Path(os.environ['MARKER'])"
        "\nif os.environ['RANK'] == '0': marker.touch()"
        "\nelse:\n    while not marker.exists(): time.sleep(0.01)\n    sys.exit(7)")
    started = time.monotonic()
    proc = launch("torch_distributed", ["python3", "-c", script], container_env([0, 1], MARKER=str(tmp_path / "m")))
    lines = sorted(line for line in proc.stdout.splitlines() if "RANK=" in line)
    assert len(lines) == 2, proc.stdout + proc.stderr
    for rank, line in enumerate(lines):
        values = dict(item.split("=", 1) for item in line.split("] ", 1)[1].split())
        assert line.startswith(f"[rank={rank}] ")
        assert values == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                          "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank),
                          "MASTER_ADDR": "127.0.0.1", "DET_CHIEF_IP": "127.0.0.1", "USE_TORCH_DISTRIBUTED": "True",
                          "TORCHELASTIC_RUN_ID": "alloc-1", "CUDA_VISIBLE_DEVICES": ""}
    assert proc.returncode == 7 and "determined.launch: rank 1 exited with status 7" in proc.stderr
    assert time.monotonic() - started < 30


def test_a_failing_worker_takes_the_others_down_at_once(tmp_path: pathlib.Path) -> None:
    script = ("import os, pathlib, sys, time\nmarker = pathlib.Path(os.environ['MARKER'])\n"
              "if os.environ['RANK'] == '1':\n"
              "    while not marker.exists(): time.sleep(0.01)\n"
              "    sys.exit(5)\n"
              "print('rank 0 waits', flush=True); marker.touch(); time.sleep(120)\n")
    started = time.monotonic()
    proc = launch("torch_distributed", ["--", "python3", "-c", script],
                  container_env([0, 1], MARKER=str(tmp_path / "m")))
    assert proc.returncode == 5 and "[rank=0] rank 0 waits" in proc.stdout
    assert time.monotonic() - started < 20, "the surviving rank kept the launcher alive"


def test_ranks_follow_the_machines_and_core_collectives_connect_across_them() -> None:
    """Two containers (machines) with 2 and 1 slots: ranks 0-1 on the first, 2 on the second."""
    script = ("import os\nfrom determined import core\nd = core.DistributedContext.from_env()\n"
              "print('ranks', os.environ['RANK'], os.environ['GROUP_RANK'], os.environ['WORLD_SIZE'], "
              "d.allgather(d.rank), flush=True)\n")
    ports = {"C10D_PORT": str(torch_distributed.free_port()), "DET_CHIEF_PORT": str(torch_distributed.free_port())}
    procs = [subprocess.Popen([PY, "-m", "determined.launch.torch_distributed", "python3", "-c", script],
                              env=container_env([0, 1][:2 - rank], rank, [2, 1], **ports), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    lines = sorted(line for out in outputs for line in out.splitlines() if " ranks " in line)
    assert lines == [f"[rank={r}] ranks {r} {g} 3 [0, 1, 2]" for r, g in ((0, 0), (1, 0), (2, 1))]


def test_tensorflow_sets_tf_config_for_several_machines_or_cpu_slots() -> None:
    script = "import os; print('TF_CONFIG=' + os.environ.get('TF_CONFIG', '-'), os.environ.get('RANK', '-'))"
    one = launch("tensorflow", ["--", "python3", "-c", script], container_env([0, 1], CUDA_VISIBLE_DEVICES="0,1"))
    assert one.returncode == 0 and one.stdout == "TF_CONFIG=- -\n"  # the script itself, as it is
    # several CPU slots on one machine: a worker per slot, each with its own port
    cpu = launch("tensorflow", ["--", "python3", "-c", script], container_env([0, 1]))
    assert cpu.returncode == 0, cpu.stderr
    lines = sorted(cpu.stdout.splitlines())
    configs = [json.loads(line.split("TF_CONFIG=", 1)[1].rsplit(" ", 1)[0]) for line in lines]
    assert [line.startswith(f"[rank={r}] ") and line.endswith(f" {r}") for r, line in enumerate(lines)] == [True] * 2
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    workers = configs[0]["cluster"]["worker"]
    assert configs[1]["cluster"]["worker"] == workers and len(set(workers)) == 2
    procs = [launch("tensorflow", ["--port", "2222", "python3", "-c", script], container_env([0], rank, [1, 1]))
             for rank in (0, 1)]
    for rank, proc in enumerate(procs):
        assert proc.returncode == 0, proc.stderr
        prefix, _, rest = proc.stdout.strip().partition(" TF_CONFIG=")
        config, worker_rank = rest.rsplit(" ", 1)
        assert prefix == f"[rank={rank}]" and worker_rank == str(rank)
        assert json.loads(config) == {"cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2222"]},
                                      "task": {"type": "worker", "index": rank}}


def test_launchers_outside_a_trial_say_so() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    proc = launch("torch_distributed", ["python3", "train.py"], env)
    assert proc.returncode == 1 and "runs inside a trial (as an experiment's entrypoint)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_torch_distributed_arguments(capsys: pytest.CaptureFixture) -> None:
    overrides, command = torch_distributed.parse_args(["--nproc_per_node", "1", "--", "--trial", "model_def:T"])
    assert overrides.nproc_per_node == 1 and command == [PY, "-m", "determined.exec.harness", "model_def:T"]
    assert torch_distributed.parse_args(["python3", "train.py", "--lr", "0.1"])[1] == [PY, "train.py", "--lr", "0.1"]
    with pytest.raises(SystemExit):
        torch_distributed.parse_args(["--rdzv_backend", "etcd", "--", "python3", "train.py"])
    assert "unsupported torchrun option(s) --rdzv_backend etcd" in capsys.readouterr().err


def test_horovod_points_to_torch_distributed(capsys: pytest.CaptureFixture) -> None:
    assert horovod.main(["--autohorovod", "--trial", "model_def:T"]) == 1
    message = capsys.readouterr().err
    assert "Horovod is not available" in message
    assert "python3 -m determined.launch.torch_distributed --trial model_def:T" in message


def test_deepspeed_gives_its_launchers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = container_env([0, 1], 1, [2, 2])
    info = core.ClusterInfo._from_env(env)
    monkeypatch.setenv("C10D_PORT", "29511")
    monkeypatch.setenv("DET_CHIEF_PORT", "29512")
    envs = deepspeed.worker_environments(info, env)
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["LOCAL_SIZE"], e["CROSS_RANK"], e["CROSS_SIZE"],
             e["MASTER_PORT"], e["USE_DEEPSPEED"]) for e in envs] == [
        ("2", "0", "4", "2", "1", "2", "29511", "1"), ("3", "1", "4", "2", "1", "2", "29511", "1")]
    assert "USE_TORCH_DISTRIBUTED" not in envs[0]


def test_deepspeed_without_the_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(deepspeed.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit) as exit_info:
        deepspeed.main(["python3", "train.py"])
    assert exit_info.value.code == 1 and "has no deepspeed package" in capsys.readouterr().err
