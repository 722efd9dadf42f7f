"""A framework-free Trial that prints what it was given (hyperparameters, environment, importable modules) as one
`PROBE {json}` line, validates once per searcher operation and reports the metric `loss` = its `optim.lr`."""

MODEL_DEF = '''
import json
import os
import sys

import determined as det


class ProbeController(det.TrialController):
    def run(self):
        self.trial_class(self.context)
        for op in self.core.searcher.operations():
            loss = float((self.context.get_hparams().get("optim") or {}).get("lr", 1.0))
            self.core.train.report_training_metrics(op.length, {"loss": loss})
            self.core.train.report_validation_metrics(op.length, {"loss": loss})
            op.report_completed(loss)


class ProbeTrial(det.Trial):
    trial_controller_class = ProbeController

    def __init__(self, context):
        report = {
            "optim": context.get_hparam("optim"),
            "env": {k: os.environ.get(k) for k in ("MY_VAR", "HOOK_VAR", "DET_MASTER", "PYTHONHASHSEED")},
            "hash_randomization": sys.flags.hash_randomization,
        }
        try:
            import extra_module
            report["extra"] = extra_module.VALUE
        except ImportError as e:
            report["extra"] = str(e)
        try:
            import det_startup_hook_probe
            report["probe"] = det_startup_hook_probe.VALUE
        except ImportError as e:
            report["probe"] = str(e)
        print("PROBE " + json.dumps(report), flush=True)
'''
