"""Every field Determined 0.14-0.38 accepted is accepted here, with its meaning or a line saying it has no effect."""
import pytest

from determined.config import InvalidExperimentConfig, load_config_text, load_experiment_config, no_effect_notes
from determined.config.log_policies import DEFAULT_LOG_POLICIES

# A config using every field of the 0.38.1 schema (schemas/expconf/v0) that 0.13 did not have, and the 0.14-0.37
# forms that 0.38 still parses.
CONFIG_038 = """
name: mnist tuned
description: a longer description
workspace: research
project: mnist
labels: [a, b]
entrypoint: model_def:MNistTrial
hyperparameters:
  global_batch_size: 64
  optimizer:
    lr: {type: log, minval: -4, maxval: -1}
    momentum: 0.9
searcher:
  name: adaptive_asha
  metric: validation_loss
  max_length: 1000
  max_trials: 8
  stop_once: true
  time_metric: batches
  max_time: 1000
resources:
  slots_per_trial: 1
  priority: 10
  resource_pool: gpu-pool
  shm_size: 4.5G
  is_single_node: true
  devices: [{host_path: /dev/fuse, container_path: /dev/fuse}]
  agent_label: fast
environment:
  image: {cpu: my/cpu:1, cuda: my/cuda:1, rocm: my/rocm:1}
  environment_variables: {cpu: [A=1], cuda: [A=2], gpu: [A=3]}
  force_pull_image: true
  registry_auth: {username: u, password: p, serveraddress: r.io, auth: x, identitytoken: t, registrytoken: t2}
  add_capabilities: [SYS_ADMIN]
  drop_capabilities: [NET_RAW]
  ports: {tb: 6006}
  proxy_ports: [{proxy_port: 8888, proxy_tcp: true, unauthenticated: false, default_service_id: true}]
  pod_spec: {spec: {containers: [{name: determined-container}]}}
log_policies:
  - {name: oom, pattern: ".*out of memory.*", action: cancel_retries}
  - {name: bad node, pattern: "ECC", action: exclude_node}
  - {name: ECC Error, pattern: null}
profiling: {enabled: true, begin_on_batch: 10, end_after_batch: 20, sync_timings: false}
retention_policy: {log_retention_days: 7}
preemption_timeout: 120
slurm: {slots_per_node: 4, gpu_type: a100, sbatch_args: [--exclusive]}
pbs: {slots_per_node: 4, pbsbatch_args: [-q, fast]}
integrations:
  webhooks: {webhook_name: [slack], exclude: false}
  pachyderm:
    pachd: {host: pachd, port: 30650}
    proxy: {host: proxy, port: 80, scheme: http}
    dataset: {project: p, repo: r, commit: c, branch: master, token: t}
checkpoint_storage: {type: directory, container_path: /tmp/ckpts, save_trial_best: 2}
bind_mounts: [{host_path: /data, container_path: /data, read_only: true}]
"""


def test_a_038_config_with_every_later_field_loads() -> None:
    config = load_experiment_config(load_config_text(CONFIG_038))
    assert config["name"] == "mnist tuned" and config["description"] == "a longer description"
    assert (config["workspace"], config["project"]) == ("research", "mnist")
    assert config["searcher"]["max_length"] == {"batches": 1000}  # a bare int (0.18+) counts batches
    assert config["searcher"]["stop_once"] is True
    assert (config["searcher"]["time_metric"], config["searcher"]["max_time"]) == ("batches", 1000)
    assert config["resources"]["shm_size"] == int(4.5 * 1024**3) and config["resources"]["priority"] == 10
    assert config["environment"]["environment_variables"] == {"cpu": ["A=1"], "cuda": ["A=2"], "rocm": [],
                                                              "gpu": ["A=2"]}
    assert config["environment"]["image"]["rocm"] == "my/rocm:1"
    assert [(p["name"], p["action"]) for p in config["log_policies"]] == [
        ("oom", "cancel_retries"), ("bad node", "exclude_node"), ("ECC Error", None), ("CUDA OOM", None)]
    assert config["log_policies"][2]["pattern"] is None  # switches the default policy of that name off
    assert config["profiling"]["enabled"] is True and config["preemption_timeout"] == 120
    assert config["checkpoint_storage"]["container_path"] == "/tmp/ckpts"
    assert load_experiment_config(config) == config  # canonical and idempotent

    notes = "\n".join(no_effect_notes(config))
    for field in ("environment.image", "environment.force_pull_image", "environment.registry_auth",
                  "environment.pod_spec", "environment.add_capabilities", "environment.proxy_ports", "slurm:", "pbs:",
                  "resources.devices", "resources.shm_size", "resources.is_single_node",
                  "resources.agent_label", "retention_policy", "integrations",
                  "searcher.stop_once", "bind_mounts"):  # stop_once: the time-based ASHA of 0.38 always stops
        assert f"{field}" in notes, field
    for meaningful in ("priority", "resources.resource_pool:", "preemption_timeout", "log_policies", "environment_variables", "searcher.time_metric",
                       "profiling", "workspace", "checkpoint_storage"):
        assert meaningful not in notes, meaningful


def test_forms_of_0_14_to_0_37_load() -> None:
    config = load_experiment_config(load_config_text("""
entrypoint: model_def:T
hyperparameters: {global_batch_size: 32}
searcher: {name: async_halving, metric: loss, num_rungs: 3, max_length: {batches: 90}, max_trials: 9, stop_once: true}
log_policies:
  - {pattern: ".*CUDA error.*", action: {type: exclude_node}}
  - {pattern: ".*bad data.*", action: {type: cancel_retries}}
environment:
  image: {cpu: c, gpu: g}
  environment_variables: {cpu: [X=1], gpu: [X=2]}
  slurm: [--time=1]
profiling: {enabled: false, begin_on_batch: 0, end_on_batch: 10}
checkpoint_storage: {type: s3, bucket: b, prefix: runs/a}
data_layer: {type: s3, bucket: b, bucket_directory_path: cache}
"""))
    assert [(p["name"], p["action"]) for p in config["log_policies"][:2]] == [(None, "exclude_node"),
                                                                              (None, "cancel_retries")]
    assert [p["name"] for p in config["log_policies"][2:]] == [p["name"] for p in DEFAULT_LOG_POLICIES]
    assert config["environment"]["image"]["cuda"] == "g" and config["environment"]["environment_variables"]["cuda"] == ["X=2"]
    assert config["checkpoint_storage"]["prefix"] == "runs/a"
    assert "data_layer.type: has no effect here" in "\n".join(no_effect_notes(config))


def test_0_13_description_is_the_name_and_a_pet_name_otherwise(minimal) -> None:
    config = load_experiment_config(minimal(description="mnist tutorial"))
    assert config["name"] == config["description"] == "mnist tutorial"
    config = load_experiment_config(minimal())
    assert config["name"].startswith("Experiment (") and config["description"] == config["name"]
    assert load_experiment_config(minimal(name="n"))["description"] == "n"


@pytest.mark.parametrize(
    "override, problem",
    [
        ({"workspace": "w"}, "project: missing while workspace is given; workspace and project must both be given"),
        ({"project": "p"}, "workspace: missing while project is given"),
        ({"searcher": {"name": "custom", "metric": "m", "unit": "steps"}}, "searcher.unit: got 'steps'"),
        ({"log_policies": [{"name": "a", "pattern": "("}]}, "log_policies[0].pattern: '(' is not a valid regular"),
        ({"log_policies": [{"pattern": "x"}]}, "log_policies[0]: a policy without a name needs both pattern"),
        ({"log_policies": [{"name": "a", "pattern": "x", "action": "reboot"}]},
         "log_policies[0].action: got 'reboot' (a string); one of cancel_retries, exclude_node"),
        ({"log_policies": [{"name": "a", "pattern": "x"}, {"name": "a", "pattern": "y"}]},
         "log_policies[1].name: 'a' is also the name of policy 0"),
        ({"log_policies": [{"name": "a", "pattren": "x"}]}, "log_policies[0].pattren: unknown field (did you mean "
                                                             "'pattern'?)"),
        ({"resources": {"shm_size": "lots"}}, "resources.shm_size: got 'lots' (a string); a size in bytes"),
        ({"profilng": {"enabled": True}}, "profilng: unknown field (did you mean 'profiling'?)"),
        ({"environment": {"proxy_port": []}}, "environment.proxy_port: unknown field (did you mean 'proxy_ports'?)"),
        ({"searcher": {"name": "single", "metric": "m", "max_length": 0}}, "searcher.max_length: got 0"),
    ],
)
def test_later_fields_are_checked(minimal, override, problem) -> None:
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(**override))
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


def test_gc_only_storage_and_slots_as_0_26_examples_have_them() -> None:
    config = load_experiment_config(load_config_text(
        "entrypoint: model_def:T\nsearcher: {name: single, metric: m, max_length: 5}\nresources: {slots: 0}\n"
        "checkpoint_storage: {save_experiment_best: 5, save_trial_best: 2}\n"))
    assert config["checkpoint_storage"] == {"save_experiment_best": 5, "save_trial_best": 2, "save_trial_latest": 1}
    from determined.config.storage import complete_storage, default_checkpoint_storage

    default = default_checkpoint_storage("/data")
    assert complete_storage(config["checkpoint_storage"], default) == {**default, "save_experiment_best": 5,
                                                                       "save_trial_best": 2, "save_trial_latest": 1}
    assert "resources.slots: has no effect here" in "\n".join(no_effect_notes(config))


def test_global_batch_size_is_not_needed_for_a_scripts_lengths() -> None:
    from determined.config.entrypoint import runs_a_script

    assert not runs_a_script({"internal": None, "entrypoint": "model_def:T"})
    assert runs_a_script({"internal": None, "entrypoint": "python3 train.py"})
    assert runs_a_script({"internal": None, "entrypoint": ["python3", "train.py"]})
    assert not runs_a_script({"internal": {"native": {"command": ["train.py"]}}, "entrypoint": None})


def test_unreachable_storage_types_are_named() -> None:
    for kind, extra in (("gcs", {"bucket": "b", "prefix": "p"}), ("azure", {"container": "c"})):
        config = load_experiment_config({"entrypoint": "m:T", "searcher": {"name": "single", "metric": "m",
                                                                           "max_length": 1},
                                         "checkpoint_storage": {"type": kind, **extra}})
        (note,) = no_effect_notes(config)
        assert note.startswith(f"checkpoint_storage: type {kind} cannot be reached from here; checkpoints go to the "
                               "master's default storage")
