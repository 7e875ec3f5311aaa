"""tf.distribute strategies by name, for the trainers' `--strategy` flag.

  cpu          one CPU (OneDeviceStrategy)
  gpu          one GPU (OneDeviceStrategy)
  mirrored     all local GPUs (MirroredStrategy); without GPUs, all local logical CPUs
               (tests split the CPU into two with `tf.config.set_logical_device_configuration`)
  multiworker  MultiWorkerMirroredStrategy over the workers named in TF_CONFIG, e.g. on
               worker 0 of two:
               TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
                           "task": {"type": "worker", "index": 0}}'
  tpu          TPUStrategy on the Cloud TPU named by `tpu`: a TPU name, a grpc://host:port
               address, or "local" on a TPU VM
"""

import dataclasses
import json
import os
from typing import Optional

import tensorflow as tf

STRATEGIES = ("cpu", "gpu", "mirrored", "multiworker", "tpu")


def create_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """The strategy called `name` (see the module docstring).

    Args:
        name: one of STRATEGIES.
        tpu: for "tpu" only: the TPU name, grpc:// address, or "local".

    Raises:
        ValueError: unknown name, a TPU address without "tpu" (or the reverse), a bad
            or missing TF_CONFIG for "multiworker", no GPU for "gpu".
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    if (name == "tpu") != bool(tpu):
        raise ValueError("--tpu (a TPU name, grpc://host:port or 'local') is required with "
                         "--strategy tpu and only there" if name == "tpu" else
                         f"--tpu={tpu!r} was given but --strategy is {name!r}, not 'tpu'")
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    if name == "gpu":
        if not tf.config.list_physical_devices("GPU"):
            raise ValueError("--strategy gpu: TensorFlow sees no GPU on this machine")
        return tf.distribute.OneDeviceStrategy("/gpu:0")
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = gpus or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multiworker":
        check_tf_config(os.environ.get("TF_CONFIG"))
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    if tpu != "local":  # a TPU VM's chips are local; a TPU node is reached over gRPC
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def check_tf_config(tf_config: Optional[str]) -> dict:
    """Parses TF_CONFIG for MultiWorkerMirroredStrategy, with errors that say what is wrong."""
    example = ('{"cluster": {"worker": ["host1:port", "host2:port"]}, '
               '"task": {"type": "worker", "index": 0}}')
    if not tf_config:
        raise ValueError(f"--strategy multiworker needs the TF_CONFIG environment variable, "
                         f"e.g. TF_CONFIG='{example}' (index = this worker's position)")
    try:
        config = json.loads(tf_config)
        workers = config["cluster"]["worker"]
        task_type, index = config["task"]["type"], int(config["task"]["index"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"TF_CONFIG is not of the form {example}: {e!r}; got {tf_config!r}")
    if not isinstance(workers, list) or not workers:
        raise ValueError(f"TF_CONFIG cluster.worker must be a non-empty list, got {workers!r}")
    if task_type not in ("worker", "chief") or not 0 <= index < len(
            config["cluster"].get(task_type, [])):
        raise ValueError(f"TF_CONFIG task {task_type}:{index} is not in the cluster "
                         f"{config['cluster']}")
    return config


def for_keras_fit(strategy: tf.distribute.Strategy) -> tf.distribute.Strategy:
    """The strategy to build and `fit` a Keras model under: `strategy`, but the default
    strategy in place of a OneDeviceStrategy on the CPU.

    Keras feeds a strategy's replicas through a MultiDeviceIterator, whose device-side
    pipeline is autotuned whatever the dataset's options say, and deleting such an
    iterator (Keras does at the end of every fit) waits until autotuning's model thread
    wakes: 8-30 s at the end of SST-2 fine-tunings, up to a minute
    (results/benchmark/iterator_delete.py; gdb showed the deleting thread waiting for
    `Model::OptimizeLoop`). The default strategy hands Keras the dataset itself, and on
    one CPU both run every op on the same device.
    """
    if (isinstance(strategy, tf.distribute.OneDeviceStrategy)
            and not tf.distribute.has_strategy()
            and tf.DeviceSpec.from_string(strategy.extended.worker_devices[0]).device_type
            == "CPU"):
        return tf.distribute.get_strategy()
    return strategy


def without_autotune(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset with tf.data's autotuning off.

    Deleting an iterator that autotuning watched can block until its model thread wakes,
    and the thread sleeps longer the longer the iterator lived (up to a minute; py-spy and
    gdb show the deleting thread in `~IteratorResource` waiting for `Model::OptimizeLoop`).
    An iterator of glue_suite's pipeline that lived 60 s took 21.6 s to delete with
    autotuning and 0.00 s without (results/benchmark/iterator_delete.py). Where a pipeline's
    parallel stages are AUTOTUNE, they run at the default parallelism instead (the CPU's
    cores), and prefetch(AUTOTUNE) still prefetches.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the one process that writes logs, metrics and exports (worker 0 of a
    multi-worker cluster; always True for the single-process strategies)."""
    return strategy.extended.should_checkpoint


def worker_id(strategy: tf.distribute.Strategy) -> int:
    """This process's index in TF_CONFIG's worker list (0 for single-process strategies)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and resolver:
        return resolver.task_id or 0
    return 0


# ---------------------------------------------------------------------------------
# Input pipelines per host.

@dataclasses.dataclass(frozen=True)
class InputLayout:
    """Where a strategy's training input is read: one input pipeline per host (the CPU
    that feeds a group of replicas), each reading its own part of the data and yielding
    its host's rows of the global batch, so that no host reads what another one does.

    Attributes:
        num_pipelines: input pipelines over the whole cluster (= hosts).
        hosts: the CPU device of each host this process feeds, in pipeline order.
        pipeline_ids: their ids among all `num_pipelines`.
        rows: global replica id -> (index into `hosts`, which block of its host's batch)
            for every replica this process drives.
        multi_client: True when other processes drive the other replicas
            (MultiWorkerMirroredStrategy); each process then checkpoints its own pipeline.
    """
    num_pipelines: int
    hosts: tuple
    pipeline_ids: tuple
    rows: dict
    multi_client: bool


def input_layout(strategy: tf.distribute.Strategy) -> InputLayout:
    """The `InputLayout` of `strategy` as seen by this process. One host (one CPU, one
    machine with GPUs, a TPU v3-8) gives one pipeline that reads the whole global batch;
    a TPU pod slice one per host; MultiWorkerMirroredStrategy one per worker."""
    replica_ids = strategy.experimental_local_results(  # the global ids of our replicas
        strategy.experimental_distribute_values_from_function(
            lambda context: context.replica_id_in_sync_group))
    return layout_of(_replica_devices(strategy), [int(r) for r in replica_ids],
                     strategy.num_replicas_in_sync)


def _replica_devices(strategy: tf.distribute.Strategy) -> tuple:
    """The devices of this process's replicas. The default strategy (no `scope()`)
    names none: its one replica runs on this process, fed by the local CPU."""
    if strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy():
        return ("/job:localhost/replica:0/task:0/device:CPU:0",)
    return tuple(strategy.extended.worker_devices)


def layout_of(devices, replica_ids, num_replicas: int) -> InputLayout:
    """`input_layout` from this process's replica devices and their global replica ids."""
    replicas_of = {}  # host CPU -> its replicas' global ids, hosts in order of first use
    for device, replica in zip(devices, replica_ids, strict=True):
        host = tf.DeviceSpec.from_string(device).replace(device_type="CPU", device_index=0)
        replicas_of.setdefault(host.to_string(), []).append(replica)
    per_host = {len(replicas) for replicas in replicas_of.values()}
    if len(per_host) != 1:
        raise ValueError(f"hosts drive different numbers of replicas: {replicas_of}")
    per_host = per_host.pop()
    hosts = sorted(replicas_of, key=lambda host: min(replicas_of[host]))
    # Pipelines are numbered in the order of their hosts' first replicas. A process that
    # drives only some replicas (multi-worker) gets a contiguous block of replica ids.
    first = min(replica_ids) // per_host
    rows = {replica: (h, block)
            for h, host in enumerate(hosts)
            for block, replica in enumerate(sorted(replicas_of[host]))}
    return InputLayout(num_pipelines=num_replicas // per_host, hosts=tuple(hosts),
                       pipeline_ids=tuple(range(first, first + len(hosts))), rows=rows,
                       multi_client=len(replica_ids) < num_replicas)
