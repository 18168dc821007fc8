# Set-up is two commands on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench vectors clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mss simulate --k 1024 --epsilon 2 --n 100000 --dist zipf:1.1 --seed 1 --plot demo.png

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python tools/bench_core.py

vectors: $(STAMP)
	$(BIN)/python -m mss_protocol.vectors --write protocol/vectors

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo.png
