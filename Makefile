# The two commands of the README: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
CONSTRAINTS := -c constraints.txt
DEMO_HOME ?= $(CURDIR)/.trainops-demo

.PHONY: demo test check lint typecheck pytest bench install-demo install-test install-mpi install-rclone install-chromium clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

$(VENV)/.demo-installed: $(PY) pyproject.toml constraints.txt
	$(PIP) install $(CONSTRAINTS) -e '.[torch,s3]'
	touch $@

# The nvml and pyinstrument extras install without a GPU; with them the suite runs NVML's "no
# driver" path and pyinstrument's profiling window (without them those tests fail under CI=true).
# The Makefile is a prerequisite: a venv made before an extra was added here gets it too.
$(VENV)/.test-installed: $(VENV)/.demo-installed Makefile
	$(PIP) install $(CONSTRAINTS) -e '.[dev,aws,torch,s3,tensorflow,mpi,ray,nvml,pyinstrument,tuning,analytics]'
	@$(MAKE) --no-print-directory install-mpi
	@$(MAKE) --no-print-directory install-rclone
	@$(MAKE) --no-print-directory install-chromium
	touch $@

# The MPI launcher's tests need Open MPI's mpirun (Debian's openmpi-bin). Installed here where
# apt-get can (root, Debian); elsewhere those tests say they were skipped and why, and fail under
# CI=true (.ci/run sets it: tests/_support/system.py).
install-mpi:
	@command -v mpirun >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q openmpi-bin >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q openmpi-bin >/dev/null 2>&1; } || \
	      echo "note: could not install openmpi-bin: the MPI launcher tests will be skipped"; \
	  else echo "note: mpirun not found and not root: the MPI launcher tests will be skipped"; fi; }

# FastFile channels on s3:// mount the prefix with rclone over FUSE (Debian's rclone and fuse3,
# for fusermount3). Installed here where apt-get can (root, Debian); elsewhere the FastFile
# s3:// tests cannot run, and such channels fail a job clearly (or fall back to File
# mode with TRAINOPS_FASTFILE_FALLBACK=1). The tests that need them are skipped here saying why,
# and fail under CI=true.
install-rclone:
	@{ command -v rclone >/dev/null 2>&1 && command -v fusermount3 >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q rclone fuse3 >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q rclone fuse3 >/dev/null 2>&1; } || \
	      echo "note: could not install rclone and fuse3: FastFile s3:// channels cannot mount here"; \
	  else echo "note: rclone or fusermount3 not found and not root: FastFile s3:// channels cannot mount here"; fi; }

# The profiler report's tests open the page in headless Chromium (Debian's chromium) to check it
# loads without a console message; the web UI's tests (tests/ui) drive it through Playwright,
# launched by its path (Playwright's own browser download is not used). Installed here where apt-get can (root, Debian); elsewhere
# those tests say they were skipped and why, and fail under CI=true.
install-chromium:
	@{ command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	   command -v google-chrome >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q chromium >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } || \
	      echo "note: could not install chromium: the report's browser tests will be skipped"; \
	  else echo "note: chromium not found and not root: the report's browser tests will be skipped"; fi; }

install-demo: $(VENV)/.demo-installed
install-test: $(VENV)/.test-installed

# The demo starts from scratch each time (fresh checkpoints), trains the digits example on the
# embedded server, and lists the jobs it has run so far.
demo: install-demo
	$(PY) examples/digits/prepare_data.py
	rm -rf examples/digits/checkpoints
	TRAINOPS_HOME=$(DEMO_HOME) $(VENV)/bin/trainops run examples/digits/job.yaml
	TRAINOPS_HOME=$(DEMO_HOME) $(VENV)/bin/trainops jobs --limit 5

lint: install-test
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples

typecheck: install-test
	$(VENV)/bin/mypy

pytest: install-test
	$(PY) -m pytest

test: lint typecheck pytest

bench: install-test
	$(PIP) install $(CONSTRAINTS) -e '.[ray]'
	$(PY) bench/launch_overhead.py

clean:
	rm -rf $(VENV) $(DEMO_HOME) .mypy_cache .ruff_cache .pytest_cache
