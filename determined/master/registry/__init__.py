"""What users name and keep: the model registry, workspaces and projects, config templates, trial sources, and the rules for names and texts."""
