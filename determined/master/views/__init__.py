"""The answers of read routes in portable SQL (the master and the CLI's local reads share them), and the JSON shapes of stored objects."""
