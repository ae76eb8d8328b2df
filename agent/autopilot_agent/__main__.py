"""``python3 -m autopilot_agent [--once]``: the agent's entry point (systemd runs it; logs go to stderr,
which journald keeps: ``journalctl -u autopilot-agent``)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import List, Optional

from . import VERSION, config
from .client import ReportClient
from .credentials import CredentialSource
from .jobs import FinishedJobs
from .loop import Agent
from .slurm import Slurm

log = logging.getLogger("autopilot_agent")
DEFAULT_STATE_DIR = "/var/lib/autopilot-agent"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="autopilot_agent", description=__doc__)
    parser.add_argument(
        "--once", action="store_true", help="one report, the commands it brings, their results; then exit"
    )
    parser.add_argument("--check", action="store_true", help="check the configuration and exit (install.sh)")
    parser.add_argument("--version", action="version", version=VERSION)
    args = parser.parse_args(argv)
    # journald timestamps each line itself
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = config.load()
    except config.ConfigError as error:
        log.error("configuration: %s", error)
        return 2
    if args.check:
        log.info("configuration ok: cluster %s, %s", settings.cluster_name, settings.reports_url)
        return 0
    slurm = Slurm()
    agent = Agent(
        ReportClient(settings, CredentialSource()),
        slurm,
        settings.poll_seconds,
        FinishedJobs(slurm, state_dir()),
    )
    log.info(
        "autopilot agent %s for cluster %s, reporting to %s every %s",
        VERSION,
        settings.cluster_name,
        settings.reports_url,
        "the API's pollSeconds" if settings.poll_seconds is None else f"{settings.poll_seconds:g} s",
    )
    if args.once:
        agent.poll_once()
        while agent.delivered and agent.outbox:
            agent.poll_once(take_commands=False)  # the results, without taking more commands
        return 0 if agent.delivered else 1
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    agent.run(stop)
    log.info("stopped")
    return 0


def state_dir() -> str:
    """Where the finished jobs' cursor lives: systemd's StateDirectory (the unit's, STATE_DIRECTORY),
    else DEFAULT_STATE_DIR."""
    return (os.environ.get("STATE_DIRECTORY") or DEFAULT_STATE_DIR).split(":", 1)[0]


if __name__ == "__main__":
    sys.exit(main())
