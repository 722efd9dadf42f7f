"""Interactive tasks beside trials (Determined's NTSC: notebooks, shells, commands, TensorBoards).

`config.py` checks a task's config, `records.py` stores tasks and their logs and says who may see or kill them,
`runner.py` starts their processes on the resource manager's free slots from the master's scheduler thread (each
through `keeper.py`, a process of its own that outlives the master, so a restarted master finds the task again),
`notebook.py` and `tensorboard.py` build those servers' commands and read a notebook's idleness, `jobs.py` lists
tasks in the job queue (scheduling/jobs.py). docs/tasks.md is the user's page.
"""
