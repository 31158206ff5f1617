"""The end of a campaign: the final report (:mod:`.final`) and its text (:mod:`.render`)."""
