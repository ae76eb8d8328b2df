"""`sam build` must succeed (aws-sam-cli expands the template's AWS::LanguageExtensions): the layer carries
the autopilot package and a current boto3 for arm64."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sam_build_produces_layer_with_package_and_current_boto3(tmp_path: Path) -> None:
    # aws-sam-cli has its own venv (requirements/sam.in: it pins boto3 exactly), as make build runs it
    sam = ROOT / ".venv-sam" / "bin" / "sam"
    if not sam.exists():
        pytest.fail("aws-sam-cli is not installed in .venv-sam (make venv installs it)")
    # sam's python3.12 workflow looks for `python3.12` on PATH; the SAM venv's interpreter is one.
    env = {
        **os.environ,
        "PATH": f"{sam.parent}{os.pathsep}{os.environ['PATH']}",
        "SAM_CLI_TELEMETRY": "0",
        # the template's Fn::ForEach: sam expands AWS::LanguageExtensions only when asked (make build asks)
        "SAM_CLI_ENABLE_LANGUAGE_EXTENSIONS": "1",
    }
    build_dir = tmp_path / "build"
    result = subprocess.run(
        [
            str(sam),
            "build",
            "--template",
            str(ROOT / "template.yaml"),
            "--build-dir",
            str(build_dir),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    layer = build_dir / "AutopilotLayer" / "python"
    assert (layer / "autopilot" / "__init__.py").is_file()
    # the rules the layer shares with the CLI: their own distribution, in the layer's folder
    assert (layer / "autopilot_config" / "validation" / "engine.py").is_file()
    botocore_dist = sorted(p.name for p in layer.glob("botocore-*.dist-info"))
    assert botocore_dist, "botocore is not bundled in the layer"
    major, minor, patch = (int(x) for x in botocore_dist[0].removeprefix("botocore-").split(".")[:3])
    # BatchRebootClusterNodes / BatchReplaceClusterNodes need botocore >= 1.41.1.
    assert (major, minor, patch) >= (1, 41, 1)
    # pydantic-core is a native wheel: it must be the arm64 (aarch64) build the functions run on.
    assert list(layer.glob("pydantic_core/*aarch64*.so"))
    shutil.rmtree(build_dir)
