"""The runners: what acts on the verdicts, as library functions any front end calls.

Each takes typed options and returns a typed report; none parses arguments or
prints. The CLI (``eventlog.cli``) and the HTTP server are thin shells over them.

- ``eventlog.runners.failback``: one failback watcher pass (``run_pass``);
- ``eventlog.runners.lanes``: the stall judge (``judge_stalls``) and the lanes runner (``run_lanes``);
- ``eventlog.runners.catchup``: the catch-up runner (``run_catchup``);
- ``eventlog.runners.sessions``: operator decisions (``decide``) and ``describe``;
- ``eventlog.runners.imports``: ``import_launchd`` and ``import_quota_log``;
- ``eventlog.runners.process``: the one way a runner starts a command (``run``).

A report's ``status`` is the exit status a CLI returns; its ``problems`` (one
line each) say why it is not 0. A RunnerError means nothing was done (bad
options, no such log): a CLI's exit 2.
"""
