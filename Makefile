# Set-up is two commands on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-firmware bench-mcu vectors system-deps clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The venv is not on PATH after make: say how to reach mss.
demo: $(STAMP)
	$(BIN)/mss demo
	@echo "mss is in $(VENV): run '. $(BIN)/activate' (then mss --help), or call $(BIN)/mss directly"

# pytest-xdist workers: most tests wait on brokers, subprocesses, ptys and TLS
# retries, so more workers than cores pay (measured on 2 cores: 2, 3, 4 workers).
# worksteal: each worker starts on a contiguous share of the tests (a module's tests stay
# together unless a worker runs dry) and an idle worker takes queued tests from a busy one,
# so no long test left at the end of one queue holds the run: measured on 2 cores, the
# whole suite in 8m28s and 8m44s, against 9m57s with --dist load's groups (tests/conftest.py).
TEST_WORKERS ?= 3
TEST_DIST ?= worksteal

# The project's bytecode compiled once: an editable install leaves it to the first import, and
# on a machine that sets PYTHONDONTWRITEBYTECODE every `mss` subprocess of the suite would compile the
# ~80 modules it imports again (0.13 s of CPU each time, about 300 times a run).
test: $(STAMP) system-deps
	$(BIN)/python -m compileall -q -j 0 aggregator protocol firmware/lib tools > /dev/null
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist $(TEST_DIST)

# Mosquitto (MQTT tests), socat (serial pty tests), PostgreSQL (shared store
# tests), Chromium (dashboard test, driven by Playwright), openssl (the TLS
# tests make their own CA), the Arm and RISC-V cross compilers, newlib,
# picolibc and QEMU (the Cortex-M and RV32 cost tests and tools/bench_mcu.py)
# come from Debian;
# installed when missing and we are root, else their tests skip (never under
# CI).  The tests start their own servers on loopback.
system-deps:
	@if { command -v mosquitto || test -x /usr/sbin/mosquitto; } >/dev/null 2>&1 && command -v socat >/dev/null 2>&1 \
		&& ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 \
		&& command -v openssl >/dev/null 2>&1 && command -v arm-none-eabi-gcc >/dev/null 2>&1 \
		&& test -d /usr/lib/arm-none-eabi/newlib && command -v qemu-system-arm >/dev/null 2>&1 \
		&& command -v riscv64-unknown-elf-gcc >/dev/null 2>&1 && test -d /usr/lib/picolibc/riscv64-unknown-elf \
		&& command -v qemu-system-riscv32 >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto socat postgresql chromium openssl >/dev/null \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm \
			gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc >/dev/null; \
	else echo "note: mosquitto, socat, postgresql, chromium, openssl or the Arm / RISC-V toolchains / QEMU missing and not root: their tests will be skipped"; fi

bench: $(STAMP)
	$(BIN)/python tools/bench_core.py

bench-firmware: $(STAMP)
	$(BIN)/python tools/bench_firmware.py

bench-mcu: $(STAMP) system-deps
	$(BIN)/python tools/bench_mcu.py --json build/mcu/bench_mcu.json

vectors: $(STAMP)
	$(BIN)/python -m mss_protocol.all_vectors --write protocol/vectors
	$(BIN)/python -m mss_aggregator.collect.link_vectors --write protocol/vectors

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo.png
