# Two commands on a fresh machine with nothing but Python 3.11:
#   make demo   installs into .venv and runs the demo
#   make test   installs into .venv and runs the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-unit test-unit-platform test-unit-rest test-integration test-demo test-cluster test-ray lint docs bench clean

install: $(STAMP)

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

# The suite in parts, three at a time on two cores: tests/integration (Ray, Serve and S3 servers:
# much of it waiting on them) and the unit tests (no Ray, mostly CPU) as two parts,
# tests/unit/platform (the models and the codec) and the rest, so the unit work fills both cores
# while the integration part waits. Make starts each next part, in the order listed, as soon as a
# part ends: the demo's test (about two minutes: a Ray cluster and a paced phone over two traces)
# when the first of them ends. No test judges this machine's speed (issue 36), so no part minds
# another's load. The unit parts run at a lower CPU priority (nice 10): where they run beside the
# kill tests, their Ray nodes still join and are declared dead within their hang guards. CI
# (.ci/run) runs the kill tests after the integration part in its lane (`test-ray`) and adds lint. Each part's output is printed whole
# when it ends; any failing fails the target. `make test-unit` runs the unit tests as one part.
TEST_PARTS ?= test-integration test-unit-platform test-unit-rest test-demo
TEST_JOBS ?= 3
UNIT := nice -n 10 $(PY) -m pytest -q -m "not cluster" --durations=10
test: $(STAMP)
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=recurse $(TEST_PARTS)

test-unit: $(STAMP)
	$(UNIT) tests/unit

test-unit-platform: $(STAMP)
	$(UNIT) tests/unit/platform

test-unit-rest: $(STAMP)
	$(UNIT) tests/unit --ignore=tests/unit/platform

test-integration: $(STAMP)
	$(PY) -m pytest -q -m "not cluster" tests/integration --ignore=tests/integration/test_demo.py --durations=10

test-demo: $(STAMP)
	$(PY) -m pytest -q tests/integration/test_demo.py

# The kill tests: multi-node Ray on this machine (worker nodes join a head, and tests SIGKILL them
# mid-build and mid-edit: tests/integration/cluster) and a build killed at random points
# (tests/integration/jobs/test_build_crash.py). A target of its own so each suite stays under 15 minutes.
test-cluster: $(STAMP)
	$(PY) -m pytest -q -m cluster tests/integration --durations=5

# The integration tests, then the kill tests: one lane, one Ray head at a time (CI's longest lane).
test-ray: $(STAMP)
	$(MAKE) --no-print-directory test-integration
	$(MAKE) --no-print-directory test-cluster

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
