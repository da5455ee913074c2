"""A project's own Remora store backend (``kvstore.backend``), tested with Remora's parallel
machines."""
