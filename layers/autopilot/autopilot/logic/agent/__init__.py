"""AgentFunction's use cases: the Slurm agent's reports (trust.py, reports.py), the workflow's
commands (commands.py) and the agent's status (status.py). docs/agent.md describes the agent."""
