"""A Determined 0.38 Hugging Face Trainer script with det.transformers.DetCallback: a tiny BERT built from a config
(no hub) classifies synthetic token sequences. The test runs it as an experiment's entrypoint."""
import logging
import os

import torch
import transformers

import determined as det
from determined.transformers import DetCallback
from wait_for_pause import wait_for_pause


class Tokens(torch.utils.data.Dataset):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, 50, (64, 8), generator=generator)
        self.labels = (self.ids[:, 0] > 25).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class WaitForPause(transformers.TrainerCallback):
    """At step 4 of a fresh run, wait until the platform asks the trial to stop."""

    def __init__(self, core_context: det.core.Context, wait_dir: str) -> None:
        self.core_context, self.wait_dir = core_context, wait_dir

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == 4:
            wait_for_pause(self.core_context, self.wait_dir)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    assert info is not None
    hparams = info.trial.hparams
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=16, num_labels=2)
    model = transformers.BertForSequenceClassification(config)
    args = transformers.TrainingArguments(
        output_dir=os.path.abspath("hf_output"), max_steps=8, per_device_train_batch_size=16,
        per_device_eval_batch_size=32, learning_rate=hparams["learning_rate"], logging_steps=2, eval_strategy="steps",
        eval_steps=4, save_steps=4, report_to=[], use_cpu=True, seed=0, disable_tqdm=True)
    with det.core.init() as core_context:
        callbacks = [DetCallback(core_context, args, user_data={"owner": "test"})]
        if info.latest_checkpoint is None:
            callbacks.append(WaitForPause(core_context, hparams["wait_dir"]))
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), eval_dataset=Tokens(),
                                       callbacks=callbacks)
        print(f"resume_from_checkpoint={args.resume_from_checkpoint}", flush=True)
        trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)


if __name__ == "__main__":
    main()
