"""Checkpoint storage as the master sees it: storage roots, garbage collection, deleting files."""
