"""The hello job of the launch-overhead benchmark: print one line and exit."""

import os

print(f"hello from {os.environ.get('SM_CURRENT_HOST', 'nowhere')}", flush=True)
