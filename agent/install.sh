#!/usr/bin/env bash
# Install (or update) the Autopilot agent on a HyperPod Slurm controller node; on_create.sh runs it as root
# after Slurm is up (docs/agent.md). Idempotent: a second run replaces the files and restarts the service.
#   autopilot-agent/install.sh       with config.json beside it (from config.example.json)
# AUTOPILOT_AGENT_ROOT prefixes every path written (default: /), for tests and image builds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${AUTOPILOT_AGENT_ROOT:-}"
prefix="$root/opt/autopilot-agent"
etc="$root/etc/autopilot-agent"
units="$root/etc/systemd/system"

say() { echo "autopilot-agent install: $*" >&2; }
fail() { say "$*"; exit 1; }

# The controller only: the agent drains and resumes through slurmctld, and Autopilot trusts reports only
# from the controller group's role (on a worker any job can read the instance's credentials).
pgrep -x slurmctld >/dev/null 2>&1 \
  || fail "not installed: no slurmctld runs on this node. Install the agent on the Slurm controller only, after Slurm is started (docs/agent.md)."
[[ -f "$here/config.json" ]] || fail "not installed: $here/config.json is missing (start from config.example.json)"
command -v python3 >/dev/null 2>&1 || fail "not installed: python3 is missing"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' || fail "not installed: the agent needs python3 >= 3.8"
# a bad config fails here, in the lifecycle log, rather than later in a restarting service
AUTOPILOT_AGENT_CONFIG="$here/config.json" PYTHONPATH="$here" python3 -m autopilot_agent --check \
  || fail "not installed: $here/config.json is not usable (the line above says why)"

mkdir -p "$prefix" "$etc" "$units"
rm -rf "$prefix/autopilot_agent.new"
cp -R "$here/autopilot_agent" "$prefix/autopilot_agent.new"
find "$prefix/autopilot_agent.new" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$prefix/autopilot_agent"
mv "$prefix/autopilot_agent.new" "$prefix/autopilot_agent"
install -m 644 "$here/config.json" "$etc/config.json"
install -m 644 "$here/autopilot-agent.service" "$units/autopilot-agent.service"
say "installed in $prefix (config $etc/config.json, unit $units/autopilot-agent.service)"

if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  systemctl enable autopilot-agent.service
  systemctl restart autopilot-agent.service
  say "started: systemctl status autopilot-agent; logs: journalctl -u autopilot-agent"
else
  say "could not start the service: systemd is not running here (no systemctl). Start it with: systemctl daemon-reload && systemctl enable --now autopilot-agent"
fi
