"""The parallel machines: planted concurrency bugs, the machines, their tests and the campaign."""
