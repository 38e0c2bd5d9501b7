# The book's two commands:
#   make book   set up, execute every chapter, render the HTML into _build/html
#   make test   set up, lint, unit tests, the HTML build (which executes every chapter once:
#               a failing assert fails it), the student edition made from that build, and
#               the browser tests of both editions; it prints the time of each stage
# Both create .venv on first use and install the tested pins from constraints.txt.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check
JB     := $(BIN)/jupyter-book

# jupyter-book: -W turns warnings into errors, -n reports broken references,
# --keep-going lists every problem before failing.
JBFLAGS ?= -W -n --keep-going

.PHONY: help setup book student-book student-check test lint format unit unit-native unit-rounding unit-rounding-checkpoints notebooks html chapters render browser browser-book browser-student colab-check bench clean distclean

# The stages of `make test`, in order: setup, lint, then `html` in its two halves (`chapters`,
# which executes each chapter once, and `render`, the build), `student-check`, and the
# browser tests of both editions. A failing assert in a chapter fails `chapters`
# (allow_errors is off in _config.yml), and the log shows the cell and its traceback.
# `student-check` makes the student edition from the chapters' runs (it executes nothing)
# and tests it. `make notebooks` (nbval, no HTML) is there for working on
# one chapter alone.
#
# Every stage keeps the two cores busy with what does not wait on it, in the background:
# the unit tests (`unit-native` beside the chapters, which run two at a time; the second run
# in two parts: `unit-rounding` without the committed checkpoints from the end of the chapters
# on, and `unit-rounding-checkpoints`, the checkpoints re-evaluated, from the end of the
# student edition's browser tests on, so that three processes share the two cores until both
# parts end together near the book's browser tests), the student edition (`student-check`,
# built from the chapters' runs in the cache, beside `render`, the book's build: each of the
# two builds renders on one core), and the student edition's browser tests
# (`browser-student`, beside the book's, `browser-book`). A stage in the background reports
# after the stage it ran beside, and its time runs from its start to its end. Set-up installs
# the Python packages and the npm assets at the same time (-j2). A failing stage fails the
# whole and stops the stages after it; the unit runs still run to their end. (The unit runs
# leave the student edition's own tests to `student-check`, which runs them on the edition
# it has just made: RNNBOOK_SKIP_STUDENT_BUILD, tests/test_student_edition.py.)

help:
	@echo "make book    execute every chapter and render the HTML into _build/html"
	@echo "make student-book  the student edition (no solutions) into _build/student"
	@echo "make test    lint, unit tests, HTML build (executes each chapter once), student edition, browser"
	@echo "make notebooks   the chapters under nbval alone (no HTML)"
	@echo "make browser every page of both editions in headless Chromium (RNNBOOK_SCREENSHOTS=DIR saves screenshots)"
	@echo "make colab-check  Chapters 1, 3, 4 and 5 with Colab's package versions (ipywidgets 7.7.1, ...)"
	@echo "make bench   run the benchmarks in benchmarks/ into _build/bench/ (the book's records stay)"
	@echo "make bench RECORD=1  the same, replacing the book's records in benchmarks/results/ (idle machine)"
	@echo "make format  apply ruff's formatting and import order"

# --- set-up --------------------------------------------------------------------------------

setup: $(VENV)/.installed book/_vendor/VERSIONS.txt

# pip compiles each installed module to bytecode on one core (half of its time, mostly
# torch's); compileall does the same on every core afterwards. A file that does not compile
# (a package's Python 2 example) is left uncompiled, as pip leaves it.
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24"
	$(PIP) install --quiet --no-compile -c constraints.txt -r requirements.txt
	$(PIP) check
	$(PY) -m compileall -qq -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
	touch $@

# MathJax and the Jupyter widget manager, vendored so that the HTML needs no CDN.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

book/_vendor/VERSIONS.txt: node_modules/.package-lock.json scripts/vendor_assets.py
	$(PYTHON) scripts/vendor_assets.py

# --- the book ------------------------------------------------------------------------------

book: setup html

# The executed pages show one line per training (rnnbook.train.summary_line), not a row of
# finished progress bars; a reader who runs a chapter in Jupyter or Colab sees a live bar
# (RNNBOOK_PROGRESS unset). Set RNNBOOK_PROGRESS=bar to build with the bars.
html notebooks: export RNNBOOK_PROGRESS ?= summary
chapters render: export RNNBOOK_PROGRESS ?= summary

# The chapters execute first, CHAPTER_JOBS at a time (each on one thread), into the build's
# jupyter-cache (scripts/execute_chapters.py: a fresh run of every chapter, the failures'
# tracebacks at the end, and no build if one failed); the build then renders those runs.
CHAPTER_JOBS ?= 2

html: setup
	$(PY) scripts/execute_chapters.py --jobs $(CHAPTER_JOBS)
	$(JB) build . $(JBFLAGS)
	@echo "The book is in _build/html/index.html"

# The two halves of `html`, which `make test` runs as two stages (it starts the second unit
# run between them): the chapters executed into the cache, then the build that renders them.
chapters: setup
	$(PY) scripts/execute_chapters.py --jobs $(CHAPTER_JOBS)

render: setup
	$(JB) build . $(JBFLAGS)
	@echo "The book is in _build/html/index.html"

# The student edition: the instructor build's executed chapters without solutions.
student-book: html
	$(PY) scripts/student_book.py

# --- tests ---------------------------------------------------------------------------------

test: export RNNBOOK_PROFILE ?= quick
test:
	@set -e; summary=""; \
	timed() { start=$$(date +%s); status=0; $(MAKE) --no-print-directory "$$@" || status=$$?; \
	    took=$$(( $$(date +%s) - start )); echo "== make $$1: $$took s"; \
	    summary="$$summary$$(printf '%-25s %5d s' $$1 $$took)\n"; return $$status; }; \
	later() { log=$$1; shift; start=$$(date +%s); status=0; \
	    $(MAKE) --no-print-directory "$$@" > $$log 2>&1 || status=$$?; \
	    echo "$$status $$(( $$(date +%s) - start ))" > $$log.done; }; \
	report() { while [ ! -f $$2.done ]; do sleep 1; done; read status took < $$2.done; \
	    echo "== make $$1 (run beside $$3):"; cat $$2; rm -f $$2 $$2.done; \
	    echo "== make $$1: $$took s (beside $$3)"; \
	    summary="$$summary$$(printf '%-25s %5d s  (beside %s)' $$1 $$took "$$3")\n"; \
	    return $$status; }; \
	timed setup -j2; timed lint; \
	native=$$(mktemp); rounding=$$(mktemp); student=$$(mktemp); browser=$$(mktemp); \
	checkpoints=$$(mktemp); \
	( export RNNBOOK_SKIP_STUDENT_BUILD=1; later $$native unit-native ) & \
	failed=0; timed chapters || failed=1; \
	( export RNNBOOK_SKIP_STUDENT_BUILD=1; \
	  later $$rounding unit-rounding ROUNDING_LEAVE_OUT=--ignore=$(CHECKPOINT_TESTS) ) & \
	if [ $$failed -eq 0 ]; then \
	    ( later $$student student-check ) & \
	    timed render || failed=1; \
	    report student-check $$student render || failed=1; \
	fi; \
	if [ $$failed -eq 0 ]; then scripts/install_browser.sh || failed=1; fi; \
	if [ $$failed -eq 0 ]; then \
	    ( later $$browser browser-student; later $$checkpoints unit-rounding-checkpoints ) & \
	    timed browser-book || failed=1; \
	    report browser-student $$browser browser-book || failed=1; \
	else \
	    ( later $$checkpoints unit-rounding-checkpoints ) & \
	fi; \
	report unit-native $$native "the stages from chapters on" || failed=1; \
	report unit-rounding $$rounding "the stages from render on" || failed=1; \
	report unit-rounding-checkpoints $$checkpoints "browser-book, after browser-student" \
	    || failed=1; \
	rm -f $$student $$browser; \
	if [ $$failed -ne 0 ]; then \
	    printf "== the stages of make test (profile $$RNNBOOK_PROFILE), until one failed:\n$$summary"; \
	    exit 1; \
	fi; \
	printf "== the stages of make test (profile $$RNNBOOK_PROFILE):\n$$summary"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The unit tests run twice: every test on this CPU's own vector kernels (unit-native), and
# the tests in which torch computes floats again on another set (unit-rounding;
# ATEN_CPU_CAPABILITY: AVX2 where the CPU has AVX-512, else the scalar kernels), whose
# rounding differs, as another machine's would. A comparison that is bitwise where it should
# allow a few ulp fails here, not on somebody else's CPU (tests/README.md). The second run
# (--rounding-run) leaves out the modules in which torch computes no float, in the test's
# process or in a kernel it starts (the book builds, the scripts, the page layout, ...): the
# list is ROUNDING_FREE in tests/conftest.py, held to that rule by tests/test_rounding_run.py
# and by a watch on those modules in the first run. `make unit` runs the two at the same
# time (each test is one thread); the second one's report follows the first's.
OTHER_KERNELS = $$($(PY) -c "import torch; print('avx2' if torch.backends.cpu.get_cpu_capability() == 'AVX512' else 'default')")

unit: setup
	@log=$$(mktemp); \
	( $(MAKE) --no-print-directory unit-rounding > $$log 2>&1; echo $$? > $$log.rc ) & \
	$(MAKE) --no-print-directory unit-native; first=$$?; wait; \
	echo "== the second unit run (another CPU's rounding):"; \
	cat $$log; second=$$(cat $$log.rc); rm -f $$log $$log.rc; \
	test $$first -eq 0 && test $$second -eq 0

unit-native: setup
	$(BIN)/pytest tests -q --durations=15

unit-rounding: setup
	@other=$(OTHER_KERNELS); echo "ATEN_CPU_CAPABILITY=$$other (another CPU's rounding)"; \
	ATEN_CPU_CAPABILITY=$$other $(BIN)/pytest tests -q -p no:cacheprovider --rounding-run \
	    $(ROUNDING_LEAVE_OUT)

# `make test` runs the second run in two parts (see `test`): `unit-rounding` leaves out
# (ROUNDING_LEAVE_OUT) the module that re-evaluates every committed checkpoint, and this target
# runs that module alone, on the same kernels. `make unit` runs it whole.
CHECKPOINT_TESTS := tests/test_book_checkpoints.py
ROUNDING_LEAVE_OUT ?=

unit-rounding-checkpoints: setup
	@other=$(OTHER_KERNELS); echo "ATEN_CPU_CAPABILITY=$$other (another CPU's rounding)"; \
	ATEN_CPU_CAPABILITY=$$other $(BIN)/pytest $(CHECKPOINT_TESTS) -q -p no:cacheprovider \
	    --rounding-run

# The student edition, made from the executed chapters of the last `make html` (it executes
# nothing), then checked to hold no solution. STUDENT_REPOSITORY=URL names the repository
# its sources are published in (launch buttons, the notebooks' first cell).
student-check: setup
	$(PY) scripts/student_book.py $(if $(STUDENT_REPOSITORY),--repository $(STUDENT_REPOSITORY))
	RNNBOOK_REQUIRE_STUDENT_BUILD=1 $(BIN)/pytest tests/test_student_edition.py -q -p no:cacheprovider

# Every chapter top to bottom under nbval, without the HTML (not part of `make test`, whose
# HTML build executes the chapters).
notebooks: setup
	$(BIN)/pytest chapters --nbval-lax --nbval-current-env -q -p no:cacheprovider

# --- browser tests -------------------------------------------------------------------------
# The pages of both editions (_build/html, or RNNBOOK_SITE, and the student edition,
# _build/student/_build/html; of the student edition, the pages whose article is not the
# book's and one per folder of the others, the rest read without a browser:
# RNNBOOK_STUDENT_PAGES=all opens them all) in Debian's headless Chromium, driven by Playwright:
# JavaScript errors, math, images, widgets, headings, launch buttons, search, light and dark
# mode (the contrast of the figures from screenshots of the figures; RNNBOOK_SCREENSHOTS=DIR
# saves a full-page screenshot of each page in each mode there, seconds of CPU each on a
# long page). The measured contrasts: _build/browser-screenshots/readability.json. It tests
# the sites as they are and builds neither. The two editions go in two processes at the same
# time (each one mostly waits on its own Chromium); the student edition's report follows the
# book's. RNNBOOK_EDITIONS=book|student picks one. `make test` runs the two halves itself:
# browser-book beside student-check, browser-student after it (see the stages above).
BROWSER_BOOK := RNNBOOK_EDITIONS=book $(BIN)/pytest tests/browser -q --durations=15
BROWSER_STUDENT := RNNBOOK_EDITIONS=student $(BIN)/pytest tests/browser/test_site.py -q

browser: setup
	scripts/install_browser.sh
	@if [ -n "$$RNNBOOK_EDITIONS" ]; then exec $(BIN)/pytest tests/browser -q; fi; \
	log=$$(mktemp); \
	( $(BROWSER_STUDENT) > $$log 2>&1; \
	  echo $$? > $$log.rc ) & \
	$(BROWSER_BOOK); first=$$?; wait; \
	echo "== the browser tests of the student edition:"; \
	cat $$log; second=$$(cat $$log.rc); rm -f $$log $$log.rc; \
	test $$first -eq 0 && test $$second -eq 0

# The halves of `browser` that `make test` runs (after scripts/install_browser.sh).
browser-book: setup
	$(BROWSER_BOOK)

browser-student: setup
	$(BROWSER_STUDENT)

# --- Colab ---------------------------------------------------------------------------------
# Chapters 1, 3, 4 and 5 (the slider figures) in a virtual environment with Colab's versions
# (ipywidgets 7.7.1, IPython 7, ipykernel 6; made once in _build/colab-venv), without the
# exercise stubs; then their sliders in the widget manager of ipywidgets 7, in Chromium.
# Not part of `make test` (minutes); COLAB_CHAPTERS=... picks others.
colab-check: setup
	scripts/install_browser.sh
	$(PY) scripts/colab_check.py $(COLAB_CHAPTERS)

# The benchmarks write _build/bench/<name>.json. The chapters quote the book's records,
# benchmarks/results/<name>.json, which only RECORD=1 (--record) replaces: make them on an
# idle machine, and check the chapters' recorded claims against them afterwards.
bench: setup
	$(PY) benchmarks/run.py $(if $(RECORD),--record)

clean:
	rm -rf _build .pytest_cache .ruff_cache

distclean: clean
	rm -rf $(VENV) node_modules book/_vendor
