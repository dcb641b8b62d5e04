# The two commands of the README: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
CONSTRAINTS := -c constraints.txt
SDK3_VENV := .venv-sdk3
DEMO_HOME ?= $(CURDIR)/.trainops-demo

.PHONY: demo test check lint typecheck pytest bench install-demo install-test install-sdk3 install-mpi install-rclone install-chromium clean

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

# The SageMaker Python SDK v3 (sagemaker-train) cannot share .venv with the v2 of the dev extra
# (both are the `sagemaker` package): tests/e2e/test_model_trainer.py runs its client in a venv of
# its own, only the packages requirements-sdk3.txt pins (--no-deps: what ModelTrainer.train()
# imports, not its whole tree). .venv's pip installs into it (--python), so it needs no pip of its
# own, and nothing is byte-compiled ahead (Python compiles what the client imports): ~16 s, not
# ~60 s. Built anew when that file changes; the stamp is written last, so a build that failed
# half-way is redone.
$(SDK3_VENV)/.installed: requirements-sdk3.txt | $(PY)
	rm -rf $(SDK3_VENV)
	$(PYTHON) -m venv --without-pip $(SDK3_VENV)
	$(PIP) --python $(SDK3_VENV)/bin/python install --no-deps --no-compile -r requirements-sdk3.txt
	touch $@

install-demo: $(VENV)/.demo-installed
install-test: $(VENV)/.test-installed $(SDK3_VENV)/.installed
install-sdk3: $(SDK3_VENV)/.installed

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
	rm -rf $(VENV) $(SDK3_VENV) $(DEMO_HOME) .mypy_cache .ruff_cache .pytest_cache
