# Set-up is two commands on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-firmware vectors system-deps clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mss demo

test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q

# Mosquitto (MQTT tests), socat (serial pty tests), PostgreSQL (shared store
# tests), Chromium (dashboard test, driven by Playwright) and openssl (the TLS
# tests make their own CA) come from Debian;
# installed when missing and we are root, else their tests skip (never under
# CI).  The tests start their own servers on loopback.
system-deps:
	@if { command -v mosquitto || test -x /usr/sbin/mosquitto; } >/dev/null 2>&1 && command -v socat >/dev/null 2>&1 \
		&& ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 \
		&& command -v openssl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto socat postgresql chromium openssl >/dev/null; \
	else echo "note: mosquitto, socat, postgresql, chromium or openssl missing and not root: their tests will be skipped"; fi

bench: $(STAMP)
	$(BIN)/python tools/bench_core.py

bench-firmware: $(STAMP)
	$(BIN)/python tools/bench_firmware.py

vectors: $(STAMP)
	$(BIN)/python -m mss_protocol.vectors --write protocol/vectors

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo.png
