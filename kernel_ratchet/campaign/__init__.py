"""The campaign: its state machine, rounds, lineage and records (SPEC sections 2, 4, 7).

* :mod:`.engine` — the state machine (BASELINE, VALIDATE, recovery) under the campaign lock;
* :mod:`.context` — what a round needs (paths, manifest, op profile, state, progress);
* :mod:`.rounds` — the round pipeline (measure -> decide -> apply -> record);
* :mod:`.lineage` — git, the incumbent's kernel files and worktree, workspace-mode;
* :mod:`.record`, :mod:`.round_decision`, :mod:`.state` — the typed history and state;
* :mod:`.render`, :mod:`.journal`, :mod:`.tips` — the logs, summaries and tips as text;
* :mod:`.create` (DEFINE_TARGET ... READ_HISTORICAL_TIPS), :mod:`.quick_bench` (the generated
  harness), :mod:`.termination`, :mod:`.status`, :mod:`.acceptance`, :mod:`.sync_back`,
  :mod:`.calibrate`, :mod:`.dryrun`, :mod:`.analyze` / :mod:`.profiling` (ANALYZE),
  :mod:`.example` (scaffolded example projects).

Campaign never imports the optimizers, the report, the MCP server or the CLI: they drive it.
"""
