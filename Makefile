# One target per habit: make test, make lint, make demo, make bench (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The Lambda runtime is python3.12; the venv and `sam build` use the same version.
# (a pyenv shim named python3.12 may exist yet fail, so each candidate is run, not just found)
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	"$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && { command -v "$$p" || echo "$$p"; } && break; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# checkov pins what dev.lock cannot share (requirements/checkov.in): its own venv
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# aws-sam-cli pins boto3 exactly (requirements/sam.in): its own venv too. The sandbox expands the template's
# AWS::LanguageExtensions with it, so every target that deploys the template needs it (through $(STAMP)).
SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed
# SAM_CLI_ENABLE_LANGUAGE_EXTENSIONS: sam expands Fn::ForEach locally only when asked (off by default)
SAM := PATH="$(abspath $(SAM_VENV)/bin):$$PATH" SAM_CLI_TELEMETRY=0 SAM_CLI_ENABLE_LANGUAGE_EXTENSIONS=1 $(SAM_VENV)/bin/sam

.PHONY: help venv slurm test test-slow test-fast lint build deploy deploy-guided delete demo bench simulate sandbox docs lock clean

help:
	@echo "make slurm   install real Slurm for the sandbox (Debian's slurmctld slurmd slurm-client slurmdbd mariadb-server; as root, when missing)"
	@echo "make test    set up .venv and run the fast tier on every core, with the coverage gate (tests/README.md)"
	@echo "make test-slow  the slow tier: whole sandboxes on a running clock, the demo, fuzz, sam build, CLI install"
	@echo "make test-fast  the fast tier without coverage, serially: PYTEST_ARGS=tests/unit/test_state.py for one module"
	@echo "make lint    ruff, mypy --strict, sam validate --lint, cfn-lint serverless rules, checkov"
	@echo "make demo    run the main job in the sandbox (scenarios + build/demo-report.json)"
	@echo "make bench   cold-start and state-transition benchmark (build/bench.json)"
	@echo "make simulate fleet what-if through the control plane (build/fleet-sim.json, .png; SIMULATE_ARGS, --help)"
	@echo "make build   sam build"
	@echo "make deploy-guided  the first deploy: sam build, then sam deploy --guided (asks for every parameter, saves samconfig.toml)"
	@echo "make deploy  sam build, then sam deploy with samconfig.toml's answers: no prompt (CI; a second run with no change succeeds)"
	@echo "make delete  sam delete (the state table, API access logs and logs role are retained)"
	@echo "make sandbox python -m sandbox up (SPEED=10 to watch a repair step by step; default 600)"
	@echo "make docs    regenerate docs/workflows/*.md (from the ASL) and docs/deploy.md's parameter table"

$(STAMP): requirements/dev.lock pyproject.toml layers/autopilot/autopilot_config/pyproject.toml cli/pyproject.toml $(SAM_STAMP)
	@test -n "$(PYTHON312)" || { echo "python3.12 not found (install it or set PYTHON312=...)"; exit 2; }
	test -x $(BIN)/python || $(PYTHON312) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements/dev.lock
	# The build backend of the editable installs below (a 3.12 venv has none; pip freeze leaves it out of
	# the lock, and nothing in it depends on setuptools since aws-sam-cli moved to .venv-sam).
	$(BIN)/python -m pip install --quiet setuptools==84.2.1
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	# the rules the layer shares with the CLI and the `autopilot` command line, each its own distribution
	# (layers/autopilot/autopilot_config/, cli/; their dependencies are in the lock)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation \
	  -e ./layers/autopilot/autopilot_config -e ./cli
	touch $(STAMP)

$(CHECKOV_STAMP): requirements/checkov.lock
	@test -n "$(PYTHON312)" || { echo "python3.12 not found (install it or set PYTHON312=...)"; exit 2; }
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON312) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements/checkov.lock
	touch $(CHECKOV_STAMP)

$(SAM_STAMP): requirements/sam.lock
	@test -n "$(PYTHON312)" || { echo "python3.12 not found (install it or set PYTHON312=...)"; exit 2; }
	test -x $(SAM_VENV)/bin/python || $(PYTHON312) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet -r requirements/sam.lock
	touch $(SAM_STAMP)

venv: $(STAMP)

# Real Slurm for the sandbox's Slurm clusters (docs/sandbox.md, "Real Slurm"), slurmdbd and MariaDB for its
# accounting (chargeback's sacct path): Debian's packages, installed
# when missing and we are root (a no-op when present). Not root: one line says how; the Slurm tests then
# skip with the same line (under CI=... they fail instead). The sandbox starts its own daemons per cluster:
# the packages' system services are not wanted, so they are stopped and disabled where systemd runs them.
SLURM_PROGRAMS := slurmctld slurmd sinfo squeue sbatch scontrol sacct sacctmgr slurmdbd mariadbd mariadb-install-db
slurm:
	@if (for p in $(SLURM_PROGRAMS); do command -v $$p >/dev/null || exit 1; done); then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Slurm (slurmctld slurmd slurm-client slurmdbd mariadb-server) with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    slurmctld slurmd slurm-client slurmdbd mariadb-server >/dev/null && \
	  { systemctl disable --now slurmctld slurmd slurmdbd mariadb >/dev/null 2>&1 || true; }; \
	else echo "make slurm: real Slurm is missing and this is not root with apt-get: run 'sudo make slurm' (the Slurm tests skip until then)"; fi

# Two tiers (tests/README.md): `slow` marks what needs a whole sandbox on a running clock or an external
# tool; everything else runs here, one worker process per core (each worker deploys its own sandboxes).
# --dist loadfile: a module runs whole, in order, on one worker, as in a serial run (its module-scoped
# sandbox is started once, and a test reading what an earlier one of its module did still sees it).
test: $(STAMP) slurm
	$(BIN)/pytest -m "not slow" -n auto --dist loadfile --cov --cov-report=term \
	  --cov-report=xml:build/coverage.xml --durations=10 $(PYTEST_ARGS)

test-slow: $(STAMP) slurm
	$(BIN)/pytest -m slow -n auto --dist loadfile --durations=10 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow" -q $(PYTEST_ARGS)

lint: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy layers/autopilot/autopilot sandbox
	# the shared rules and the CLI, each with its own distribution's settings (Python 3.10)
	$(BIN)/mypy --config-file layers/autopilot/autopilot_config/pyproject.toml layers/autopilot/autopilot_config
	$(BIN)/mypy --config-file cli/pyproject.toml cli/src/autopilot_cli
	# every handler is a module named app: one mypy run per function folder
	for handler in functions/*/app.py; do $(BIN)/mypy $$handler || exit 1; done
	# the controller-node agent (its Python 3.8 syntax and stdlib-only imports: tests/unit/test_agent_portable.py)
	$(BIN)/mypy agent/autopilot_agent
	$(SAM) validate --lint --template template.yaml --region us-east-1
	# serverless best practices (cfn-lint-serverless); the rules that do not fit are ignored in the template
	$(SAM_VENV)/bin/cfn-lint template.yaml -a cfn_lint_serverless.rules
	# checkov: stack-wide skips in .checkov.yaml, a resource's own under its Metadata (each with its reason).
	# checkov does not know AWS::LanguageExtensions (it skips what Fn::ForEach generates, silently): it reads
	# the template as the sandbox deploys it, expanded by aws-sam-cli's implementation
	mkdir -p build && $(BIN)/python -c 'import json, sys; from sandbox.emulator.deploy import load_template; \
	  json.dump(load_template(sys.argv[1]), sys.stdout, indent=1)' template.yaml > build/template.expanded.json
	$(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml --file build/template.expanded.json

build: $(STAMP)
	# what `pip install ./layers/autopilot/autopilot_config` leaves in the folder (setuptools builds
	# there): sam build would ship it in the layer
	rm -rf layers/autopilot/autopilot_config/build
	$(SAM) build --template template.yaml

# Deploy to the account and region of your AWS credentials (docs/deploy.md; not run in CI here).
# deploy-guided asks for every parameter and saves the answers in samconfig.toml; deploy reads them and
# asks nothing (samconfig.toml's confirm_changeset is for guided runs), and a run with nothing to change
# succeeds, so CI and a second deploy can use it. SAM_DEPLOY_ARGS adds options, e.g.
# SAM_DEPLOY_ARGS='--parameter-overrides PermissionsBoundary=arn:aws:iam::111122223333:policy/boundary'.
deploy: build
	$(SAM) deploy --no-confirm-changeset \
	  --no-fail-on-empty-changeset $(SAM_DEPLOY_ARGS)

deploy-guided: build
	$(SAM) deploy --guided $(SAM_DEPLOY_ARGS)

delete: $(STAMP)
	$(SAM) delete

demo: $(STAMP) slurm
	$(BIN)/python -m sandbox demo

bench: $(STAMP)
	$(BIN)/python -m sandbox.apps.bench

# SIMULATE_ARGS: python -m sandbox.apps.simulate --help (scale, spares, policies, job and failure model)
simulate: $(STAMP)
	$(BIN)/python -m sandbox.apps.simulate $(SIMULATE_ARGS)

# SPEED: simulated seconds per wall second while the control plane waits (600: a create in seconds;
# 10: slow enough to watch a node repair step by step, docs/sandbox.md "Watch a node heal")
SPEED ?= 600
sandbox: $(STAMP) slurm
	$(BIN)/python -m sandbox up --speed $(SPEED)

# generated docs; tests/unit/test_workflow_diagrams.py and test_docs.py fail when they are stale
docs: $(STAMP)
	$(BIN)/python -m sandbox.apps.docgen

# Re-resolve the pinned environment from the top-level requirements.
lock:
	$(PYTHON312) -m venv build/lockenv && build/lockenv/bin/pip install -q -r requirements/dev.in \
	  && { echo "# Pinned development + test environment (Python 3.12). Regenerate: make lock"; \
	       build/lockenv/bin/pip freeze --exclude setuptools --exclude wheel; } > requirements/dev.lock
	$(PYTHON312) -m venv build/checkovlockenv && build/checkovlockenv/bin/pip install -q -r requirements/checkov.in \
	  && { echo "# checkov in .venv-checkov (Python 3.12). Regenerate: make lock"; \
	       build/checkovlockenv/bin/pip freeze --exclude setuptools --exclude wheel; } > requirements/checkov.lock
	$(PYTHON312) -m venv build/samlockenv && build/samlockenv/bin/pip install -q -r requirements/sam.in \
	  && { echo "# aws-sam-cli in .venv-sam (Python 3.12). Regenerate: make lock"; \
	       build/samlockenv/bin/pip freeze --exclude setuptools --exclude wheel; } > requirements/sam.lock

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(SAM_VENV) .aws-sam build .pytest_cache .mypy_cache .ruff_cache
