"""Every retry, restart and time bound of the parts machinery, in one place, with the reason for each value. The
machinery is: a Ray Data pipeline of scorer actors over parts (jobs/plane/scoring_pool.py); a watchdog that stops a job
whose parts stop finishing (jobs/plane/watch.py); a replanner that sends what a lost node left to a new pool
(jobs/plane/watch.replanning); and row isolation for parts a failed pipeline did not commit (jobs/plane/isolation.py).
A served model's HTTP retries belong to its client (scoring/api/client.py: --api-max-retries, backoff, timeout)."""
from __future__ import annotations

# No part finished in this long: the job stops with one line saying what a scorer needs and what the alive nodes
# offer; the parts already written stay, and the same command resumes (--stall-timeout).
STALL_TIMEOUT_S = 1800.0

# Ray Data restarts a crashed scorer actor and retries the part it held: twice, so one bad row does not cost a
# whole part, while a row that crashes every time reaches isolation quickly.
SCORER_MAX_RESTARTS = 2
SCORER_MAX_TASK_RETRIES = 2

# Row isolation scores one row at a time on actors that are always restarted (-1) and never retry a task (0):
# the isolator itself decides, row by row, how often to try.
ISOLATION_MAX_RESTARTS = -1
ISOLATION_MAX_TASK_RETRIES = 0
ROW_ATTEMPTS = 2  # a row that fails this many times on its own is quarantined as worker_failed
MAX_SINGLE_FAILURES_IN_A_ROW = 3  # more rows failing alone in a row than this: the fault is not the rows; stop
ISOLATION_BATCH = 16  # rows scored together before falling back to one at a time

# Node losses a job absorbs by rescheduling the parts left on the nodes still alive; beyond that, what is left goes
# to row isolation part by part.
MAX_REPLANS = 3
# How long the GCS may take to mark a killed node dead (its health check gives up after ~30 s).
SETTLE_S = 45.0
