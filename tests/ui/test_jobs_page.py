"""The Jobs page (/jobs) and the Cluster page's pools and agents, on a master of two pools: `train` (slot 0,
priority with preemption, priority_limit 10) and `share` (slot 1, fair_share). Each pool's slot is held by an
admin's gated trial (tests/scheduling/gated_core_trial.py: it waits at batch 0 for a file that never comes), so the
jobs of alice and bob behind it queue. The page shows each pool's queue in the master's order, with why each job
waits; alice may change her jobs' priority (and sees the master's refusal), bob may not touch hers (no control, and
a forged request is refused), an admin may change any (and a priority above the holder's preempts it: the holder then
waits with its trial's note). Screenshots go to the artifacts folder as `jobs-*.png` and `cluster-pools-*.png`."""
import pathlib
import re
import sys
import types
from typing import Any, Dict, Iterator, List, Optional, Tuple

import httpx
import pytest

from determined.master import embedded
from determined.master.db import TrialLog, utcnow
from determined.master.rm import Slots
from determined.master.scheduling import jobs as job_queue
from determined.master.scheduling import pools, queue_updates, wait_reasons
from tests.master._helpers import model_def
from tests.ui.conftest import Api

GATED_TRIAL = pathlib.Path(__file__).resolve().parents[1] / "scheduling" / "gated_core_trial.py"
WAIT = {"timeout": 30000}
ROWS = """(pool) => Array.from(document.querySelectorAll(`section.pool-queue[data-pool="${pool}"] tbody tr[data-job]`))
  .map((tr) => tr.dataset.job)"""


@pytest.fixture(scope="module")
def queue_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    data = tmp_path_factory.mktemp("jobs-master")
    cluster = pools.parse({"default_compute_resource_pool": "train", "priority_limit": 10}, [
        {"pool_name": "train", "description": "slot 0", "slots": [0],
         "scheduler": {"type": "priority", "preemption": True}},
        {"pool_name": "share", "description": "slot 1", "slots": [1], "scheduler": {"type": "fair_share"}}])
    master = embedded.start(data, slots=Slots(gpus=[], cpu_count=2), preemption_timeout=15,
                            trial_command=[sys.executable, str(GATED_TRIAL)], resource_pools=cluster)
    try:
        admin = Api(master.url, "admin")
        for user in ("alice", "bob"):
            admin.post("/users", {"username": user, "password": ""})
        users = {"admin": admin, "alice": Api(master.url, "alice"), "bob": Api(master.url, "bob")}
        never = str(data / "no-such-gate")

        def submit(user: str, name: str, pool: str, **resources: Any) -> str:
            cfg = {"name": name, "entrypoint": "model:T", "max_restarts": 0,
                   "resources": {"resource_pool": pool, **resources},
                   "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 4}},
                   "hyperparameters": {"global_batch_size": 1, "x": 0.5, "gate": never, "gate_at": 0}}
            exp = users[user].post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"]
            return next(j["job_id"] for j in admin.get("/job-queues")["jobs"] if j["entity_id"] == str(exp))

        jobs = {"hold": submit("admin", "hold", "train", priority=5), "hold-share": submit("admin", "hold-share", "share")}
        admin.wait(lambda: all(j["allocated_slots"] == 1 for j in admin.get("/job-queues")["jobs"]), 30,
                   "the admin's two jobs hold their pools' slots")
        for user, name, pool, extra in (("alice", "alice-1", "train", {}), ("bob", "bob-1", "train", {}),
                                        ("alice", "alice-2", "train", {}), ("bob", "bob-share", "share", {}),
                                        ("alice", "alice-share", "share", {"weight": 2})):
            jobs[name] = submit(user, name, pool, **extra)
        yield {"url": master.url, "jobs": jobs, "master": master.master, **users}
    finally:
        master.stop(timeout=15)


def queue(api: Api, pool: str) -> List[Dict[str, Any]]:
    return api.get("/job-queues", resource_pool=pool)["jobs"]  # type: ignore[no-any-return]


def open_as(browser: Any, env: Dict[str, Any], user: str, path: str, size: Tuple[int, int] = (1280, 800)) -> Any:
    """A page of a new browser context logged in as `user` (its token where the login page leaves it)."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    token = env[user].client.headers["Authorization"].split(" ", 1)[1]
    context.add_init_script(f"localStorage.setItem('det_token', {token!r});")
    page = context.new_page()
    page.problems = []
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    page.on("console", lambda m: page.problems.append(m.text) if m.type == "error" else None)
    page.goto(env["url"] + path)
    return page


def unexpected(problems: List[str]) -> List[str]:
    """The page's problems but Chromium's line for the refusal the test asked for."""
    return [p for p in problems if "the server responded with a status of 403" not in p]


def shown_order(page: Any, env: Dict[str, Any], pool: str) -> List[str]:
    """Wait until the page shows the pool's queue in the master's order (as the master answers now); answer it."""
    expected = [j["job_id"] for j in queue(env["admin"], pool)]
    page.wait_for_function(f"(want) => JSON.stringify(({ROWS})({pool!r})) === JSON.stringify(want)", arg=expected, **WAIT)
    return expected


def names(env: Dict[str, Any], order: List[str]) -> List[str]:
    by_id = {v: k for k, v in env["jobs"].items()}
    return [by_id[j] for j in order]


def editable(page: Any) -> List[str]:
    return page.eval_on_selector_all("form.job-edit", "fs => fs.map(f => f.dataset.job)")  # type: ignore[no-any-return]


def set_value(page: Any, job_id: str, value: str) -> None:
    form = f"form.job-edit[data-job='{job_id}']"
    page.fill(f"{form} input", value)
    page.click(f"{form} button")


def overflow(page: Any) -> Optional[str]:
    width, window = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    return f"{page.url} lays out {width} px wide in a {window} px window" if width > window else None


@pytest.mark.parametrize("size", [(390, 844), (1280, 800)], ids=["390x844", "1280x800"])
def test_the_jobs_and_cluster_pages_fit_and_show_the_queue_in_the_masters_order(
        queue_env: Dict[str, Any], browser: Any, artifacts: pathlib.Path, size: Tuple[int, int]) -> None:
    env, jobs = queue_env, queue_env["jobs"]
    page = open_as(browser, env, "bob", "/jobs", size)
    try:
        for pool in ("train", "share"):
            order = shown_order(page, env, pool)
            assert order[0] == jobs["hold" if pool == "train" else "hold-share"], names(env, order)
        assert page.is_visible("nav a.current[data-nav='jobs']")
        # fair share shows weights (alice-share's 2), priority pools priorities; QUEUED/SCHEDULED, held/wanted slots
        share = page.inner_text("section.pool-queue[data-pool='share']")
        assert "Weight" in share or size[0] < 700, share
        row = f"tr[data-job='{jobs['alice-share']}']"
        assert page.inner_text(f"{row} td[data-label='Weight']").strip().endswith("2")
        assert page.inner_text(f"{row} td[data-label='State']").strip().endswith("QUEUED")
        assert page.inner_text(f"{row} td[data-label='Slots']").strip().endswith("0/1")
        held = f"tr[data-job='{jobs['hold']}']"
        assert page.inner_text(f"{held} td[data-label='State']").strip().endswith("SCHEDULED")
        assert page.get_attribute(f"{held} td[data-label='Name'] a", "href").startswith("/experiments/")
        # why each job waits, as the master words it: the slots it wants and the jobs ahead of it in its pool
        api_reasons = {j["job_id"]: j["waiting_reason"] for j in queue(env["admin"], "train")}
        assert api_reasons[jobs["hold"]] is None
        for name in ("alice-1", "bob-1", "alice-2"):
            reason = page.inner_text(f"tr[data-job='{jobs[name]}'] .job-reason")
            assert reason == api_reasons[jobs[name]], (name, reason)
            assert re.fullmatch(r"waiting for 1 slot; \d jobs? ahead in pool 'train'", reason), reason
        page.wait_for_timeout(300)  # fonts and wrapping settle
        page.screenshot(path=str(artifacts / f"jobs-queue-{size[0]}.png"), full_page=True)
        assert overflow(page) is None, overflow(page)

        page.goto(env["url"] + "/cluster")
        page.wait_for_selector("#pools-table tbody tr", **WAIT)
        page.wait_for_selector(".agent tbody tr a", **WAIT)  # a slot held by a trial links to it
        pools_text = page.inner_text("#pools-table")
        for words in ("train", "share", "fair share", "priority, preemption on", "1/1", "compute"):
            assert words in pools_text, (words, pools_text)
        slots = page.inner_text("#agents")
        assert "2 slots" in slots and "train" in slots and "share" in slots, slots
        page.wait_for_timeout(300)
        page.screenshot(path=str(artifacts / f"cluster-pools-{size[0]}.png"), full_page=True)
        assert overflow(page) is None, overflow(page)
        assert unexpected(page.problems) == []
    finally:
        page.context.close()


def test_alice_moves_her_job_bob_cannot_touch_it_and_an_admin_can(queue_env: Dict[str, Any], browser: Any,
                                                                    artifacts: pathlib.Path) -> None:
    env, jobs = queue_env, queue_env["jobs"]
    alice = open_as(browser, env, "alice", "/jobs")
    try:
        before = shown_order(alice, env, "train")
        assert names(env, before) == ["hold", "alice-1", "bob-1", "alice-2"]
        assert sorted(editable(alice)) == sorted([jobs["alice-1"], jobs["alice-2"], jobs["alice-share"]])
        set_value(alice, jobs["alice-2"], "20")  # ahead of the other 42s, behind the admin's 5: no preemption
        alice.wait_for_function(f"() => ({ROWS})('train')[1] === {jobs['alice-2']!r}", **WAIT)
        assert names(env, shown_order(alice, env, "train")) == ["hold", "alice-2", "alice-1", "bob-1"]
        assert [j["priority"] for j in queue(env["admin"], "train")] == [5, 20, 42, 42]
        set_value(alice, jobs["alice-1"], "3")  # above the master's priority_limit for non-admins: refused
        error = alice.wait_for_selector(f"form.job-edit[data-job='{jobs['alice-1']}'] .job-error", **WAIT).inner_text()
        assert "priority_limit" in error and "10" in error, error
        assert [j["priority"] for j in queue(env["admin"], "train")] == [5, 20, 42, 42], "nothing changed"
        alice.screenshot(path=str(artifacts / "jobs-alice-refused.png"), full_page=True)
        assert unexpected(alice.problems) == []
    finally:
        alice.context.close()

    bob = open_as(browser, env, "bob", "/jobs")
    try:
        shown_order(bob, env, "train")
        assert sorted(editable(bob)) == sorted([jobs["bob-1"], jobs["bob-share"]])  # none of alice's or the admin's
        assert bob.inner_text(f"tr[data-job='{jobs['alice-2']}'] .job-value") == "20"
        forged = httpx.post(env["url"] + "/api/v1/job-queues", headers=env["bob"].client.headers,
                            json={"updates": [{"job_id": jobs["alice-2"], "priority": 50}]})
        assert forged.status_code == 403 and "owned by 'alice'" in forged.text, forged.text
        assert queue(env["admin"], "train")[1]["priority"] == 20
    finally:
        bob.context.close()

    admin = open_as(browser, env, "admin", "/jobs")
    try:
        shown_order(admin, env, "train")
        assert sorted(editable(admin)) == sorted(jobs.values())  # every job
        set_value(admin, jobs["bob-1"], "1")  # above the holder's 5 in a pool with preemption: the holder yields
        admin.wait_for_function(f"() => ({ROWS})('train')[0] === {jobs['bob-1']!r}", **WAIT)
        assert names(env, shown_order(admin, env, "train")) == ["bob-1", "hold", "alice-2", "alice-1"]
        # the preempted holder waits: the slot it wants, the job ahead, its trial's status and the master's note
        hold = f"tr[data-job='{jobs['hold']}'] .job-reason"
        admin.wait_for_function(f"() => /checkpointed and stopped/.test(document.querySelector({hold!r}).textContent)",
                                **WAIT)
        reason = admin.inner_text(hold)
        assert reason.startswith("waiting for 1 slot; 1 job ahead in pool 'train'; trial "), reason
        assert "waiting for a slot to resume from batch 0" in reason and "job of higher priority" in reason, reason
        admin.screenshot(path=str(artifacts / "jobs-admin-preempted.png"), full_page=True)
        assert unexpected(admin.problems) == []
    finally:
        admin.context.close()


def test_a_ray_run_waiting_for_a_nodes_storage_answer_says_so_with_its_note(queue_env: Dict[str, Any]) -> None:
    """A Ray run in state "storage" (rm/ray.py: a node has not answered whether it sees the checkpoint storage) has
    its trial's slot but does not run: its job's reason is the run's own note in the trial's logs."""
    env, master = queue_env, queue_env["master"]
    exp = int(next(j["entity_id"] for j in queue(env["admin"], "share") if j["job_id"] == env["jobs"]["hold-share"]))
    trial = env["admin"].get(f"/experiments/{exp}")["trials"][0]["id"]
    note = ("waits for Ray node(s) 10.0.0.7 to answer whether they see checkpoint_storage.host_path /shared/ckpt "
            "(the cluster is busy); the trial starts once they do")
    with master.write() as s:
        s.add(TrialLog(trial_id=trial, timestamp=utcnow(), stream="stdout", message=f"[ray] run ray-7 {note}"))
    run = types.SimpleNamespace(state="storage", exit_code=None, allocation_id="ray-7", trial_id=trial,
                                experiment_id=exp)
    with master.read() as s:
        every = job_queue.all_jobs(s)
        ahead = queue_updates.jobs_ahead(every)
        [job] = [j for j in every if j.job_id == env["jobs"]["hold-share"]]
        assert wait_reasons.waiting_reasons(s, [job], ahead, {})[job.job_id] is None  # it holds what it wants
        assert wait_reasons.waiting_reasons(s, [job], ahead, {"ray-7": run})[job.job_id] == f"trial {trial} {note}"
        run.state = "running"
        assert wait_reasons.waiting_reasons(s, [job], ahead, {"ray-7": run})[job.job_id] is None
