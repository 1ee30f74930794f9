# Two commands on a fresh machine with nothing but Python 3.11:
#   make demo   installs into .venv and runs the demo
#   make test   installs into .venv and runs the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-unit test-integration test-demo test-cluster lint docs bench clean

install: $(STAMP)

# Python caches each module it compiles as bytecode beside the source. An environment that sets
# PYTHONDONTWRITEBYTECODE (this machine's does) turns that off, and with --no-compile below no
# process then finds a cached module: every test's child process, Ray worker and Serve replica
# compiled torch, diffusers and ray from source again (a child that loads tiny-sd3: 17.3 s, 6.7 s
# once cached; 2026-12-06, this 2-core machine). The targets here let Python write its cache.
unexport PYTHONDONTWRITEBYTECODE

# torch is installed first and pinned by constraints.txt so nothing pulls a CUDA build.
# --no-compile: Python compiles a module when it is first imported, not every file of every
# package at install (torch, ray and transformers ship tens of thousands).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-compile -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/sakura demo --out demo-out

# The suite in parts on two cores: tests/unit (no Ray, mostly CPU) and tests/integration (Ray,
# Serve and S3 servers: much of it waiting on them) side by side, so both cores work; the demo's
# test (about two minutes: a Ray cluster and a paced phone over two traces) is a part of its own
# that starts when the first of them ends. No test judges this machine's speed (issue 36), so no
# part minds another's load. The unit half runs at a lower CPU priority (nice 10): where it runs
# beside the kill tests, their Ray nodes still join and are declared dead within their hang
# guards (beside the unit half at full priority a node once missed its join deadline). CI
# (.ci/run) adds the kill tests and lint to the same schedule: make starts each next part, in the
# order listed, as soon as a part ends, so no core idles while the longer half finishes. Each
# part's output is printed whole when it ends; any failing fails the target.
TEST_PARTS ?= test-unit test-integration test-demo
test: $(STAMP)
	$(MAKE) --no-print-directory -j2 --output-sync=recurse $(TEST_PARTS)

test-unit: $(STAMP)
	nice -n 10 $(PY) -m pytest -q -m "not cluster" tests/unit --durations=10

test-integration: $(STAMP)
	$(PY) -m pytest -q -m "not cluster" tests/integration --ignore=tests/integration/test_demo.py --durations=10

test-demo: $(STAMP)
	$(PY) -m pytest -q tests/integration/test_demo.py

# The kill tests: multi-node Ray on this machine (worker nodes join a head, and tests SIGKILL them
# mid-build and mid-edit: tests/integration/cluster) and a build killed at random points
# (tests/integration/jobs/test_build_crash.py). A target of its own so each suite stays under 15 minutes.
test-cluster: $(STAMP)
	$(PY) -m pytest -q -m cluster tests/integration --durations=5

# ruff (style, imports, likely bugs) and mypy (types) over the package, tests and benchmarks, and
# the documentation site built strictly (a broken link or docstring fails it).
lint: $(STAMP) docs
	$(VENV)/bin/ruff check src tests bench docs/hooks
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml, docs/; the API reference from the docstrings) into site/.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(PY) bench/capture.py

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache
