"""The round pipeline, one step per module, each given the campaign's context:

* :mod:`.preconditions` — what ``validate`` refuses before a round is opened;
* :mod:`.measure` — scope check, transfer audit, rebuild, focused test, then
* :mod:`.levels` — harness and gates at the round's level, :mod:`.paired` (the paired A/B),
  the skew check, escalation to the full level, :mod:`.transfer` (the dynamic check);
* :mod:`.apply` — commit the accepted round, or restore the incumbent's kernel files;
* :mod:`.close` — the round's summary, trend row, log section, tip and index entry
  (:mod:`.view` is what they show);
* :mod:`.baseline` — round 1.

The engine (:mod:`kernel_ratchet.campaign.engine`) runs them in order under the write-ahead
record of the round in flight.
"""
