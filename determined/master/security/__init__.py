"""Who may do what: logins and tokens, users, password throttling, request limits, browser protections, and keeping trial processes away from the master's files."""
