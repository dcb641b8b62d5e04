"""``smdebug.core``: the modules scripts import from it (``modes``, ``collection``, configs)."""
