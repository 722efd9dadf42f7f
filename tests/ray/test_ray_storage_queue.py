"""Issue 32, "a job must queue, never bounce": the Ray resource manager's check that every node sees a shared_fs
`host_path` refuses a submission only for a definite answer (a node that does not see it); a node that does not
answer in time (a busy cluster) leaves the experiment accepted, and its trial waits, with a note in its logs,
until the answer comes: then it asks for its placement group, or, when the answer is "not visible", it ends
with the reason. No cluster: Ray and its tasks are stand-ins."""
import pathlib
from typing import Any, Dict, List, Optional

from determined.master.rm import ray as ray_rm

SEES = {"ip": "", "sees_marker": True, "writable": True, "error": ""}
BLIND = {"ip": "", "sees_marker": False, "writable": False, "error": "No such file or directory"}


class _Ref:
    def __init__(self, node: str) -> None:
        self.node, self.answer, self.canceled = node, None, False  # answer None: still running


class _FakeRay:
    def __init__(self) -> None:
        self.refs: List[_Ref] = []

    def wait(self, refs: List[_Ref], num_returns: int, timeout: float) -> Any:
        return [r for r in refs if r.answer is not None], [r for r in refs if r.answer is None]

    def get(self, ref: _Ref) -> Dict[str, Any]:
        return dict(ref.answer or {})

    def cancel(self, ref: _Ref, force: bool) -> None:
        ref.canceled = True


class _Task:
    def __init__(self, fake: _FakeRay, answers: Dict[str, Optional[Dict[str, Any]]]) -> None:
        self.fake, self.answers, self.node = fake, answers, ""

    def options(self, **kwargs: Any) -> "_Task":
        task = _Task(self.fake, self.answers)
        task.node = kwargs["scheduling_strategy"]
        return task

    def remote(self, path: str, marker: str, expected: str) -> _Ref:
        ref = _Ref(self.node)
        ref.answer = self.answers[self.node]
        self.fake.refs.append(ref)
        return ref


def _manager(answers: Dict[str, Optional[Dict[str, Any]]]) -> Any:
    rm: Any = object.__new__(ray_rm.RayResourceManager)
    rm._runs, rm._dead, rm._idle, rm._warming = {}, set(), [], []
    rm._placements, rm._disabled = {}, {}  # no resource pools of its own, no disabled node
    rm.trial_user, rm._storage_checks, rm._storage_bad, rm._storage_ok = None, [], {}, {}
    rm.slots = ray_rm.ClusterSlots(kind="cpu", total=4)
    rm.trial_host, rm.storage_check_timeout = None, 0.01
    rm._alive = {"n1": {"NodeManagerAddress": "10.0.0.1"}, "n2": {"NodeManagerAddress": "10.0.0.2"}}
    rm._ray = _FakeRay()
    rm._check_task = _Task(rm._ray, answers)
    rm._node_strategy = lambda node_id, soft: node_id
    rm._refresh = lambda force=False: None
    rm._collect = lambda: None
    rm.lines = []
    rm.log_sink = lambda trial_id, ts, stream, line: rm.lines.append((trial_id, stream, line))
    rm.made = []

    def new_pg(run: Any) -> None:
        run.pg, run.state, run.ready_ref = f"pg-{run.allocation_id}", "pending", None
        rm.made.append(run.allocation_id)

    rm._new_placement_group = new_pg
    rm._release = lambda pg, actors: None
    return rm


def _launch(rm: Any, storage: pathlib.Path, allocation_id: str = "a1") -> Any:
    context = {"config": {"checkpoint_storage": {"type": "shared_fs", "host_path": str(storage)}}}
    return rm.launch(trial_id=7, experiment_id=3, allocation_id=allocation_id, token="t", slots_needed=1,
                     master_url="http://master", context=context)


def test_a_slow_node_queues_the_trial_until_it_answers(tmp_path: pathlib.Path) -> None:
    rm = _manager({"n1": SEES, "n2": None})  # n2 is too busy to answer within the check's timeout
    assert rm._check_shared_fs(str(tmp_path)) == []  # accepted, not "did not answer within ...; submit again"
    [marker] = list(tmp_path.glob(".det-ray-check-*"))  # kept for the node still to answer
    run = _launch(rm, tmp_path)
    assert run.state == "storage" and rm.made == [] and rm.free_slots() == 3  # queued, its slot reserved
    [note] = [line for _, _, line in rm.lines]
    assert "waits for Ray node(s) 10.0.0.2 to answer whether they see checkpoint_storage.host_path" in note, note
    assert rm.poll_exited() == [] and run.state == "storage"  # still no answer: still waiting
    assert rm._check_shared_fs(str(tmp_path)) == []  # a second submission joins the same check
    assert len(rm._ray.refs) == 2
    rm._ray.refs[1].answer = SEES
    assert rm.poll_exited() == []
    assert run.state == "pending" and rm.made == ["a1"]  # it asked for its placement group
    assert not marker.exists()
    assert rm._check_shared_fs(str(tmp_path)) == [] and len(rm._ray.refs) == 2  # the answer is cached


def test_a_late_not_visible_answer_ends_the_waiting_trial_and_refuses_the_next_submission(
        tmp_path: pathlib.Path) -> None:
    rm = _manager({"n1": SEES, "n2": None})
    assert rm._check_shared_fs(str(tmp_path)) == []
    run = _launch(rm, tmp_path)
    rm._ray.refs[1].answer = BLIND
    assert rm.poll_exited() == [(7, "a1", 127)] and rm.made == []
    assert any("cannot start: checkpoint_storage.host_path" in line and "not the same directory on Ray node 10.0.0.2"
               in line for _, _, line in rm.lines), rm.lines
    [problem] = rm._check_shared_fs(str(tmp_path))
    assert "not the same directory on Ray node 10.0.0.2" in problem and run.exit_code == 127


def test_a_definite_answer_within_the_timeout_still_refuses(tmp_path: pathlib.Path) -> None:
    rm = _manager({"n1": SEES, "n2": BLIND})
    [problem] = rm._check_shared_fs(str(tmp_path))
    assert "not the same directory on Ray node 10.0.0.2" in problem
    assert not list(tmp_path.glob(".det-ray-check-*"))
