"""The strategy factory: names, TPU and TF_CONFIG argument handling."""

import json

import pytest
import tensorflow as tf

from bert_tf import distribute


def test_cpu_is_one_device():
    strategy = distribute.create_strategy("cpu")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.num_replicas_in_sync == 1
    assert distribute.is_chief(strategy) and distribute.worker_id(strategy) == 0


def test_keras_fits_on_one_cpu_under_the_default_strategy():
    default = tf.distribute.get_strategy()
    assert distribute.for_keras_fit(distribute.create_strategy("cpu")) is default
    mirrored = distribute.create_strategy("mirrored")
    assert distribute.for_keras_fit(mirrored) is mirrored
    cpu = distribute.create_strategy("cpu")
    with cpu.scope():  # inside a scope the default strategy cannot be entered
        assert distribute.for_keras_fit(cpu) is cpu


def test_mirrored_uses_every_local_device():
    strategy = distribute.create_strategy("mirrored")
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    assert strategy.num_replicas_in_sync == len(devices)
    assert distribute.is_chief(strategy)


@pytest.mark.parametrize("name, tpu, message", [
    ("horovod", None, "unknown strategy"),
    ("tpu", None, "--tpu .* is required"),
    ("mirrored", "my-tpu", "--strategy is 'mirrored', not 'tpu'"),
])
def test_bad_arguments(name, tpu, message):
    with pytest.raises(ValueError, match=message):
        distribute.create_strategy(name, tpu)


def test_gpu_without_gpu_is_an_error():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="no GPU"):
        distribute.create_strategy("gpu")


def test_multiworker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs the TF_CONFIG"):
        distribute.create_strategy("multiworker")


@pytest.mark.parametrize("tf_config, message", [
    ("not json", "not of the form"),
    (json.dumps({"cluster": {"worker": ["a:1"]}}), "not of the form"),
    (json.dumps({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}),
     "non-empty"),
    (json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}),
     "not in the cluster"),
])
def test_bad_tf_config(tf_config, message):
    with pytest.raises(ValueError, match=message):
        distribute.check_tf_config(tf_config)


def test_good_tf_config():
    config = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
              "task": {"type": "worker", "index": 1}}
    assert distribute.check_tf_config(json.dumps(config)) == config


@pytest.mark.parametrize("address, connects", [("grpc://10.0.0.2:8470", True),
                                               ("my-tpu", True), ("local", False)])
def test_tpu_resolves_connects_and_initializes(monkeypatch, address, connects):
    """No TPU here: check that the factory makes the calls a Cloud TPU needs, in order."""
    calls = []

    class Resolver:
        def __init__(self, tpu):
            calls.append(("resolve", tpu))

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                        lambda r: calls.append(("connect", type(r))))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                        lambda r: calls.append(("initialize", type(r))))
    monkeypatch.setattr(tf.distribute, "TPUStrategy",
                        lambda r: calls.append(("strategy", type(r))) or "tpu-strategy")
    assert distribute.create_strategy("tpu", address) == "tpu-strategy"
    expected = [("resolve", address)] + [("connect", Resolver)] * connects + [
        ("initialize", Resolver), ("strategy", Resolver)]
    assert calls == expected


# ------------------------------------------------------------------------- input layout
@pytest.mark.parametrize("strategy", [lambda: distribute.create_strategy("cpu"),
                                      tf.distribute.get_strategy],
                         ids=["one_device", "default"])
def test_one_host_reads_the_whole_batch(strategy):
    layout = distribute.input_layout(strategy())
    assert layout.num_pipelines == 1 and layout.pipeline_ids == (0,)
    assert layout.hosts == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    assert layout.rows == {0: (0, 0)} and not layout.multi_client


def test_a_pod_slice_reads_one_pipeline_per_host():
    """A TPU v3-32 as one client sees it: 4 hosts x 8 cores, the replicas numbered in the
    device assignment's order, which need not follow the hosts."""
    devices, ids = [], []
    for replica in range(32):
        task = replica % 4  # interleaved on purpose
        devices.append(f"/job:worker/replica:0/task:{task}/device:TPU:{replica // 4}")
        ids.append(replica)
    layout = distribute.layout_of(devices, ids, 32)
    assert layout.num_pipelines == 4 and layout.pipeline_ids == (0, 1, 2, 3)
    assert layout.hosts == tuple(f"/job:worker/replica:0/task:{t}/device:CPU:0"
                                 for t in range(4))
    assert not layout.multi_client
    # Every replica takes a different block of its own host's batch.
    for host in range(4):
        blocks = sorted(block for h, block in layout.rows.values() if h == host)
        assert blocks == list(range(8))
    assert layout.rows[5] == (1, 1)  # task 1's second replica


def test_each_worker_reads_its_own_pipeline():
    """MultiWorkerMirroredStrategy, worker 1 of 3, two GPUs each: replicas 2 and 3."""
    devices = [f"/job:worker/replica:0/task:1/device:GPU:{i}" for i in range(2)]
    layout = distribute.layout_of(devices, [2, 3], 6)
    assert layout.num_pipelines == 3 and layout.pipeline_ids == (1,)
    assert layout.hosts == ("/job:worker/replica:0/task:1/device:CPU:0",)
    assert layout.rows == {2: (0, 0), 3: (0, 1)} and layout.multi_client


def test_hosts_must_drive_equal_numbers_of_replicas():
    devices = ["/job:worker/task:0/device:TPU:0", "/job:worker/task:0/device:TPU:1",
               "/job:worker/task:1/device:TPU:0"]
    with pytest.raises(ValueError, match="different numbers of replicas"):
        distribute.layout_of(devices, [0, 1, 2], 3)
