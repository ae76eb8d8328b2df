"""Which scripts an on_create.sh runs (the preflight checks each is next to it in S3)."""

from __future__ import annotations

from autopilot_config.validation.preflight import named_scripts


def test_relative_scripts_a_shell_script_runs_are_named_in_order() -> None:
    script = """#!/bin/bash
set -ex
# python3 commented_out.py is not run
python3 -u lifecycle_script.py -rc $SAGEMAKER_RESOURCE_CONFIG_PATH
bash ./utils/install_docker.sh && bash "utils/install_enroot.sh"
source /etc/profile.d/absolute.sh
bash $SCRIPTS/from_a_variable.sh
chmod +x ../outside.sh
python3 -u lifecycle_script.py  # again
"""
    assert named_scripts(script) == [
        "lifecycle_script.py",
        "utils/install_docker.sh",
        "utils/install_enroot.sh",
    ]
