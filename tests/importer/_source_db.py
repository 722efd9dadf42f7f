"""Synthetic Determined databases for the importer's tests: the tables and columns the importer reads, as Determined
0.20, 0.26 and 0.38 named and typed them (written for these tests from the schema's facts), filled with rows
generated here."""
import json
import random
import uuid
from typing import Any, Dict, List

ENUMS = """
CREATE TYPE experiment_state AS ENUM ('ACTIVE', 'CANCELED', 'COMPLETED', 'ERROR', 'PAUSED', 'STOPPING_CANCELED',
    'STOPPING_COMPLETED', 'STOPPING_ERROR', 'DELETING', 'DELETE_FAILED', 'RUNNING', 'QUEUED');
CREATE TYPE checkpoint_state AS ENUM ('ACTIVE', 'COMPLETED', 'ERROR', 'DELETED', 'PARTIALLY_DELETED');
"""
COMMON = """
CREATE TABLE cluster_id (cluster_id text NOT NULL, cluster_heartbeat timestamp NOT NULL DEFAULT now());
CREATE TABLE users (id serial PRIMARY KEY, username text NOT NULL UNIQUE, password_hash text, admin boolean,
    active boolean, display_name text);
CREATE TABLE workspaces (id serial PRIMARY KEY, name text NOT NULL, archived boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(), user_id integer, immutable boolean DEFAULT false);
CREATE TABLE projects (id serial PRIMARY KEY, name text NOT NULL, description text, archived boolean NOT NULL DEFAULT
    false, created_at timestamptz NOT NULL DEFAULT now(), notes jsonb, workspace_id integer, user_id integer,
    immutable boolean DEFAULT false);
CREATE TABLE experiments (id serial PRIMARY KEY, state experiment_state NOT NULL, config jsonb NOT NULL,
    model_definition bytea NOT NULL, start_time timestamptz NOT NULL, end_time timestamptz,
    archived boolean NOT NULL DEFAULT false, parent_id integer, owner_id integer NOT NULL, progress double precision,
    original_config text, notes text NOT NULL DEFAULT '', job_id text NOT NULL DEFAULT '', project_id integer NOT NULL);
CREATE TABLE checkpoints_v2 (id bigserial, uuid uuid NOT NULL, task_id text, allocation_id text,
    report_time timestamptz NOT NULL, state checkpoint_state NOT NULL, resources jsonb, metadata jsonb);
CREATE TABLE models (id serial PRIMARY KEY, name varchar NOT NULL, description varchar, creation_time timestamptz NOT
    NULL, last_updated_time timestamptz, metadata jsonb, labels text[], user_id integer NOT NULL,
    archived boolean NOT NULL DEFAULT false, notes text, workspace_id integer NOT NULL);
CREATE TABLE model_versions (id serial PRIMARY KEY, version integer NOT NULL, checkpoint_uuid uuid NOT NULL,
    creation_time timestamptz NOT NULL, last_updated_time timestamptz, metadata jsonb, model_id integer NOT NULL,
    name text, comment text, user_id integer, labels text[], notes text);
CREATE TABLE task_logs (id bigserial PRIMARY KEY, task_id text NOT NULL, allocation_id text, agent_id text,
    container_id text, rank_id smallint, source text, stdtype text, level text, timestamp timestamp, log bytea NOT NULL);
"""
TRIAL_STATE = "CREATE TYPE trial_state AS ENUM ('ACTIVE','CANCELED','COMPLETED','ERROR','PAUSED','STOPPING_CANCELED'," \
              "'STOPPING_COMPLETED','STOPPING_ERROR','STOPPING_KILLED','RUNNING','QUEUED');"
STEP_STATE = "CREATE TYPE step_state AS ENUM ('ACTIVE', 'COMPLETED', 'ERROR');"

SCHEMAS = {
    "0.20": ENUMS + TRIAL_STATE + STEP_STATE + COMMON + """
CREATE TABLE trials (id serial PRIMARY KEY, experiment_id integer NOT NULL, state trial_state NOT NULL,
    start_time timestamptz NOT NULL, end_time timestamptz, hparams jsonb NOT NULL, seed integer NOT NULL,
    request_id text, task_id text, run_id integer NOT NULL DEFAULT 0, restarts integer NOT NULL DEFAULT 0);
CREATE TABLE raw_steps (id serial PRIMARY KEY, trial_id integer NOT NULL, state step_state NOT NULL, end_time timestamptz,
    metrics jsonb, total_batches integer NOT NULL, total_records integer NOT NULL DEFAULT 0,
    total_epochs real NOT NULL DEFAULT 0, trial_run_id integer NOT NULL DEFAULT 0, archived boolean NOT NULL DEFAULT false);
CREATE TABLE raw_validations (id serial PRIMARY KEY, trial_id integer NOT NULL, state step_state NOT NULL,
    end_time timestamptz, metrics jsonb, total_batches integer NOT NULL, total_records integer NOT NULL DEFAULT 0,
    total_epochs real NOT NULL DEFAULT 0, trial_run_id integer NOT NULL DEFAULT 0, archived boolean NOT NULL DEFAULT false);
CREATE TABLE raw_checkpoints (id serial PRIMARY KEY, trial_id integer NOT NULL, state checkpoint_state NOT NULL,
    end_time timestamptz, uuid uuid, resources jsonb, metadata jsonb, format varchar, framework varchar,
    determined_version varchar, total_batches integer NOT NULL, total_records integer NOT NULL DEFAULT 0,
    total_epochs real NOT NULL DEFAULT 0, trial_run_id integer NOT NULL DEFAULT 0, archived boolean NOT NULL DEFAULT false);
""",
    "0.26": ENUMS + TRIAL_STATE + COMMON + """
CREATE TYPE metric_partition_type AS ENUM ('VALIDATION', 'TRAINING', 'GENERIC');
CREATE TABLE trials (id serial PRIMARY KEY, experiment_id integer NOT NULL, state trial_state NOT NULL,
    start_time timestamptz NOT NULL, end_time timestamptz, hparams jsonb NOT NULL, seed integer NOT NULL,
    request_id text, run_id integer NOT NULL DEFAULT 0, restarts integer NOT NULL DEFAULT 0,
    total_batches integer NOT NULL DEFAULT 0, summary_metrics jsonb NOT NULL DEFAULT '{}');
CREATE TABLE trial_id_task_id (trial_id integer NOT NULL, task_id text NOT NULL);
CREATE TABLE metrics (trial_id integer NOT NULL, end_time timestamptz, metrics jsonb, total_batches integer NOT NULL,
    trial_run_id integer NOT NULL DEFAULT 0, archived boolean NOT NULL DEFAULT false, id serial NOT NULL,
    metric_group text NOT NULL, partition_type metric_partition_type NOT NULL) PARTITION BY LIST (partition_type);
CREATE TABLE raw_steps PARTITION OF metrics FOR VALUES IN ('TRAINING');
CREATE TABLE raw_validations PARTITION OF metrics FOR VALUES IN ('VALIDATION');
CREATE TABLE generic_metrics PARTITION OF metrics FOR VALUES IN ('GENERIC');
CREATE TABLE raw_checkpoints (id serial PRIMARY KEY, trial_id integer NOT NULL, state checkpoint_state NOT NULL,
    end_time timestamptz, uuid uuid, resources jsonb, metadata jsonb, format varchar, framework varchar,
    determined_version varchar, total_batches integer NOT NULL, trial_run_id integer NOT NULL DEFAULT 0,
    archived boolean NOT NULL DEFAULT false, size bigint NOT NULL DEFAULT 0);
ALTER TABLE checkpoints_v2 ADD COLUMN size bigint NOT NULL DEFAULT 0;
""",
    "0.38": ENUMS + TRIAL_STATE + COMMON + """
CREATE TABLE runs (id serial PRIMARY KEY, experiment_id integer NOT NULL, state trial_state NOT NULL,
    start_time timestamptz NOT NULL, end_time timestamptz, hparams jsonb NOT NULL, restart_id integer NOT NULL DEFAULT 0,
    restarts integer NOT NULL DEFAULT 0, total_batches integer NOT NULL DEFAULT 0, project_id integer NOT NULL DEFAULT 1,
    archived boolean NOT NULL DEFAULT false, local_id integer, summary_metrics jsonb NOT NULL DEFAULT '{}');
CREATE TABLE trials_v2 (not_trial_id serial, run_id integer, request_id text, seed integer NOT NULL);
CREATE VIEW trials AS SELECT r.id, r.experiment_id, r.state, r.start_time, r.end_time, r.hparams, r.restarts,
    r.restart_id AS run_id, t.request_id, t.seed FROM trials_v2 t JOIN runs r ON t.run_id = r.id;
CREATE TABLE run_id_task_id (run_id integer NOT NULL, task_id text NOT NULL);
CREATE TABLE metrics (trial_id integer NOT NULL, end_time timestamptz, metrics jsonb, total_batches integer,
    trial_run_id integer NOT NULL DEFAULT 0, archived boolean NOT NULL DEFAULT false, id serial NOT NULL,
    metric_group text, partition_type text NOT NULL) PARTITION BY LIST (partition_type);
CREATE TABLE raw_steps PARTITION OF metrics FOR VALUES IN ('TRAINING');
CREATE TABLE raw_validations PARTITION OF metrics FOR VALUES IN ('VALIDATION');
CREATE TABLE generic_metrics PARTITION OF metrics FOR VALUES IN ('GENERIC');
ALTER TABLE checkpoints_v2 ADD COLUMN size bigint NOT NULL DEFAULT 0, ADD COLUMN storage_id integer;
""",
}

STATES = ["COMPLETED"] * 7 + ["ACTIVE", "PAUSED", "CANCELED"]


def build(url: str, generation: str, storages: List[Dict[str, Any]], *, metric_rows: int = 2000,
          seed: int = 0) -> Dict[str, Any]:
    """Create generation `generation`'s tables in the empty database `url` and fill them: 3 users, 2 workspaces,
    10 experiments of 4 trials, `metric_rows` metric rows, 60 checkpoints (experiments 1-5 on storages[0],
    6-10 on storages[1]), 2 models with 3 versions, logs. What was written, for the checks."""
    import psycopg

    rng = random.Random(seed)
    facts: Dict[str, Any] = {"checkpoints": {}, "experiments": {}, "trials": {}}
    with psycopg.connect(url) as conn:
        conn.execute(SCHEMAS[generation])
        conn.execute("INSERT INTO cluster_id VALUES (%s)", (f"cluster-{generation}",))
        for i, (name, admin) in enumerate([("admin", True), ("alice", False), ("bob", False)], start=1):
            conn.execute("INSERT INTO users (id, username, password_hash, admin, active) VALUES (%s,%s,%s,%s,true)",
                         (i, name, "$2a$10$secret-hash", admin))
        conn.execute("INSERT INTO workspaces (id, name, immutable, user_id) VALUES (1, 'Uncategorized', true, 1), "
                     "(2, 'research', false, 2)")
        conn.execute("INSERT INTO projects (id, name, workspace_id, immutable, user_id, notes, archived) VALUES "
                     "(1, 'Uncategorized', 1, true, 1, '[]', false), "
                     "(2, 'vision', 2, false, 2, '[{\"name\": \"plan\", \"contents\": \"try resnets\"}]', false), "
                     "(3, 'old', 2, false, 3, '[]', true)")
        trial_id = 0
        task_of: Dict[int, str] = {}
        for e in range(1, 11):
            storage = storages[0] if e <= 5 else storages[1]
            config = {"name": f"exp-{e}", "description": f"experiment {e}", "labels": ["imported", f"e{e}"],
                      "searcher": {"name": "random", "metric": "validation_loss", "smaller_is_better": True,
                                   "max_trials": 4, "max_length": {"batches": 1000}},
                      "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
                      "entrypoint": "model_def:Trial", "checkpoint_storage": storage, "resources": {"slots_per_trial": 1}}
            state = STATES[e - 1]
            conn.execute("INSERT INTO experiments (id, state, config, model_definition, start_time, end_time, owner_id, "
                         "progress, original_config, notes, project_id) VALUES (%s,%s,%s,%s,now() - interval '2 days',"
                         "%s,%s,%s,%s,%s,%s)",
                         (e, state, json.dumps(config), _model_def(e),
                          None if state == "ACTIVE" else "2024-01-02T00:00:00Z", 1 + e % 3, 1.0, "name: x",
                          f"notes of {e}", 2 if e <= 6 else 1))
            facts["experiments"][e] = {"state": state, "config": config}
            for t in range(4):
                trial_id += 1
                task = f"task-{uuid.UUID(int=trial_id)}"
                task_of[trial_id] = task
                hp = {"lr": round(rng.uniform(0.001, 0.1), 5)}
                tstate = "COMPLETED" if state == "COMPLETED" else ("ACTIVE" if state == "ACTIVE" else state)
                facts["trials"][trial_id] = {"experiment": e, "hparams": hp}
                if generation == "0.38":
                    conn.execute("INSERT INTO runs (id, experiment_id, state, start_time, end_time, hparams, restarts) "
                                 "VALUES (%s,%s,%s,now(),now(),%s,%s)", (trial_id, e, tstate, json.dumps(hp), t % 2))
                    conn.execute("INSERT INTO trials_v2 (run_id, request_id, seed) VALUES (%s,%s,%s)",
                                 (trial_id, f"req-{trial_id}", trial_id * 7))
                    conn.execute("INSERT INTO run_id_task_id VALUES (%s,%s)", (trial_id, task))
                else:
                    cols = "id, experiment_id, state, start_time, end_time, hparams, seed, request_id, restarts"
                    vals = [trial_id, e, tstate, "2024-01-01", "2024-01-02", json.dumps(hp), trial_id * 7,
                            f"req-{trial_id}", t % 2]
                    if generation == "0.20":
                        cols += ", task_id"
                        vals.append(task)
                    conn.execute(f"INSERT INTO trials ({cols}) VALUES ({','.join(['%s'] * len(vals))})", vals)
                    if generation == "0.26":
                        conn.execute("INSERT INTO trial_id_task_id VALUES (%s,%s)", (trial_id, task))
                for c in range(6 if t == 0 else 0):
                    cid = str(uuid.UUID(int=rng.getrandbits(128)))
                    conn.execute("INSERT INTO checkpoints_v2 (uuid, task_id, report_time, state, resources, metadata) "
                                 "VALUES (%s,%s,now(),%s,%s,%s)",
                                 (cid, task, "COMPLETED", json.dumps({"model.pt": 12, "meta.json": 2}),
                                  json.dumps({"steps_completed": (c + 1) * 100, "framework": "torch-2.0",
                                              "format": "pickle", "determined_version": generation})))
                    facts["checkpoints"][cid] = {"experiment": e, "trial": trial_id, "steps": (c + 1) * 100,
                                                 "storage": storage}
        _metrics(conn, generation, trial_id, metric_rows, rng)
        uuids = list(facts["checkpoints"])
        conn.execute("INSERT INTO models (id, name, description, creation_time, metadata, labels, user_id, notes, "
                     "workspace_id) VALUES (1, 'resnet', 'the vision model', now(), '{\"team\": \"cv\"}', "
                     "'{prod,cv}', 2, 'model notes', 2), (2, 'bert', '', now(), '{}', '{}', 3, NULL, 1)")
        conn.execute("INSERT INTO model_versions (id, version, checkpoint_uuid, creation_time, metadata, model_id, "
                     "name, comment, notes, labels) VALUES (1, 1, %s, now(), '{\"acc\": 0.9}', 1, 'first', 'c1', "
                     "'n1', '{a}'), (2, 2, %s, now(), '{}', 1, 'second', NULL, NULL, NULL), "
                     "(3, 1, %s, now(), '{}', 2, NULL, NULL, NULL, NULL)", (uuids[0], uuids[1], uuids[40]))
        facts["versions"] = {("resnet", 1): uuids[0], ("resnet", 2): uuids[1], ("bert", 1): uuids[40]}
        with conn.cursor().copy("COPY task_logs (task_id, timestamp, stdtype, log) FROM STDIN") as copy:
            for tid, task in task_of.items():
                for n in range(5):
                    copy.write_row((task, "2024-01-01 00:00:00", "stdout", f"trial {tid} line {n}\n".encode()))
            copy.write_row(("cmd-1", "2024-01-01 00:00:00", "stdout", b"a command's line\n"))
    return facts


def _model_def(e: int) -> bytes:
    """A .tar.gz of a model directory, as Determined kept it."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = f"# experiment {e}\nclass Trial:\n    pass\n".encode()
        info = tarfile.TarInfo("model_def.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _metrics(conn: Any, generation: str, trials: int, rows: int, rng: random.Random) -> None:
    """`rows` metric rows spread over the trials: 4 training rows for each validation row."""
    per_trial = max(rows // trials, 5)
    with conn.cursor() as cur:
        if generation == "0.20":
            steps_copy = "COPY raw_steps (trial_id, state, end_time, metrics, total_batches, total_epochs) FROM STDIN"
            val_copy = "COPY raw_validations (trial_id, state, end_time, metrics, total_batches, total_epochs) FROM STDIN"
            train_rows, val_rows = [], []
            for trial, step in _steps(trials, per_trial):
                if step % 5 == 4:
                    val_rows.append((trial, "COMPLETED", "2024-01-01T00:00:00Z",
                                     json.dumps({"validation_metrics": {"validation_loss": 1.0 / (step + 1)},
                                                 "num_inputs": 10}), step * 10, step / 10))
                else:
                    train_rows.append((trial, "COMPLETED", "2024-01-01T00:00:00Z",
                                       json.dumps({"avg_metrics": {"loss": rng.random()},
                                                   "batch_metrics": [{"loss": 0.5}]}), step * 10, step / 10))
            for sql, values in ((steps_copy, train_rows), (val_copy, val_rows)):
                with cur.copy(sql) as copy:
                    for value in values:
                        copy.write_row(value)
            return
        with cur.copy("COPY metrics (trial_id, end_time, metrics, total_batches, metric_group, partition_type) "
                      "FROM STDIN") as copy:
            for trial, step in _steps(trials, per_trial):
                if step % 5 == 4:
                    copy.write_row((trial, "2024-01-01T00:00:00Z", json.dumps(
                        {"validation_metrics": {"validation_loss": 1.0 / (step + 1)}, "num_inputs": 10}),
                        step * 10, "validation", "VALIDATION"))
                else:
                    copy.write_row((trial, "2024-01-01T00:00:00Z", json.dumps(
                        {"avg_metrics": {"loss": rng.random(), "epoch": step / 10},
                         "batch_metrics": [{"loss": 0.5}]}), step * 10, "training", "TRAINING"))
            copy.write_row((1, "2024-01-01T00:00:00Z", json.dumps({"avg_metrics": {"throughput": 3.0}}), 10,
                            "inference", "GENERIC"))


def _steps(trials: int, per_trial: int) -> Any:
    for step in range(per_trial):
        for trial in range(1, trials + 1):
            yield trial, step
