"""`python3 -m determined.launch.horovod ...`: Horovod is not available here; this says what to use instead.

Determined deprecated its Horovod launcher in 0.38.0. Horovod needs MPI or Gloo built into its own wheel, which
does not install from PyPI on current PyTorch and TensorFlow. Scripts use `torch.distributed`
(`determined.launch.torch_distributed`) or `tf.distribute` (`determined.launch.tensorflow`); a Trial class
entrypoint (`module:Class`) runs distributed on its own.
"""
import sys
from typing import List, Optional

MESSAGE = (
    "determined.launch.horovod: Horovod is not available on this platform (Determined deprecated it in 0.38). "
    "Use `python3 -m determined.launch.torch_distributed {script}` for a PyTorch script (torch.distributed, "
    "one worker per slot, DistributedDataParallel instead of hvd.DistributedOptimizer), "
    "`python3 -m determined.launch.tensorflow {script}` for tf.distribute, or give a Trial class as the "
    "entrypoint (`model_def:MyTrial`): it runs on every slot without a launcher."
)


def message(argv: List[str]) -> str:
    script = [a for a in argv if a not in ("--autohorovod",)]
    if "--" in script:
        script = script[script.index("--") + 1:]
    if script[:1] == ["--trial"] and len(script) > 1:
        return MESSAGE.format(script=f"--trial {script[1]}")
    return MESSAGE.format(script=" ".join(script) or "python3 train.py")


def main(argv: Optional[List[str]] = None) -> int:
    print(f"error: {message(list(sys.argv[1:] if argv is None else argv))}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
