"""A training script written for Determined 0.38's core_v2 (tests/core/test_core_v2.py, tests/server/
test_unmanaged_server.py): fits y = 3x by gradient descent, reports, checkpoints, continues from a checkpoint.

Run as an experiment's entrypoint (managed) or as `python _core_v2_script.py` (unmanaged; CORE_V2_* variables give
the Config). It prints one line `RESULT {json}` at the end; CORE_V2_FAIL=1 makes it raise before closing."""
import json
import os

from determined.experimental import core_v2


def main() -> None:
    env = os.environ
    core_v2.init(config=core_v2.Config(
        name=env.get("CORE_V2_NAME", "core-v2-script"),
        hparams={"lr": 1.0, "steps": 20},
        labels=["test"],
        workspace=env.get("CORE_V2_WORKSPACE") or None,
        project=env.get("CORE_V2_PROJECT") or None,
        external_experiment_id=env.get("CORE_V2_EXPERIMENT") or None,
        external_trial_id=env.get("CORE_V2_TRIAL") or None,
    ))
    hparams = core_v2.info.trial.hparams
    lr, steps = float(hparams["lr"]), int(hparams["steps"])
    xs = [i / 10 for i in range(-10, 11)]
    w, start = 0.0, 0
    if core_v2.info.latest_checkpoint is not None:
        with core_v2.checkpoint.restore_path(core_v2.info.latest_checkpoint) as path:
            state = json.loads((path / "state.json").read_text())
        w, start = state["w"], state["step"]
    losses = []
    for step in range(start + 1, start + steps + 1):
        grad = sum(2 * (w * x - 3 * x) * x for x in xs) / len(xs)
        w -= lr * grad
        loss = sum((w * x - 3 * x) ** 2 for x in xs) / len(xs)
        losses.append(loss)
        core_v2.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
    core_v2.train.report_validation_metrics(steps_completed=start + steps, metrics={"loss": losses[-1], "x": w})
    core_v2.train.report_progress(1.0)
    with core_v2.checkpoint.store_path({"steps_completed": start + steps}) as (path, storage_id):
        (path / "state.json").write_text(json.dumps({"w": w, "step": start + steps}))
    info = core_v2.info
    print("RESULT " + json.dumps({
        "experiment_id": info.experiment_id, "trial_id": info.trial_id, "start": start, "w": w,
        "first_loss": losses[0], "last_loss": losses[-1], "checkpoint": storage_id, "slot_ids": info.slot_ids,
        "trial_run_id": info.trial_run_id, "url": core_v2.url_reverse_webui_exp_view()}), flush=True)
    if env.get("CORE_V2_FAIL"):
        raise RuntimeError("failing on purpose")
    core_v2.close()


if __name__ == "__main__":
    main()
