"""An example project using Remora with its own worker and its own record processing."""
