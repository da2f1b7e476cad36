"""The kernel every stage leans on: errors and their exit codes, device and precision, the permissions a user
grants for one command, and the cache root."""
