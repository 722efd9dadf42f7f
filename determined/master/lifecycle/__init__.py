"""The life of experiments and trials: the search state machine, what users do to them, runs, the trial protocol, their logs and the words shown about them."""
