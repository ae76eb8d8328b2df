"""The GPU table: every instance type HyperPod accepts has a known NVIDIA GPU count."""

from autopilot_config.models.instance_types import CLUSTER_INSTANCE_TYPES, GPUS_PER_INSTANCE_TYPE, gpus_for


def test_every_cluster_instance_type_has_a_gpu_count() -> None:
    missing = sorted(CLUSTER_INSTANCE_TYPES - GPUS_PER_INSTANCE_TYPE.keys())
    assert not missing, f"add these to _GPU_SIZES or _NO_GPU_FAMILIES in instance_types.py: {missing}"


def test_gpu_counts_as_aws_lists_them() -> None:
    assert gpus_for("ml.p5.48xlarge") == 8
    assert gpus_for("ml.p5.4xlarge") == 1
    assert gpus_for("ml.p6e-gb200.36xlarge") == 4
    assert gpus_for("ml.g5.12xlarge") == 4
    assert gpus_for("ml.g6e.16xlarge") == 1
    assert gpus_for("ml.trn2.48xlarge") == 0
    assert gpus_for("ml.c5.large") == 0


def test_an_unknown_instance_type_has_no_gpus() -> None:
    assert gpus_for("ml.p9.96xlarge") == 0
