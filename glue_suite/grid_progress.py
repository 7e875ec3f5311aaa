"""A learning-rate x seed grid that survives a stop: `glue_suite.run` keeps each finished
grid point on disk, and the same command run again skips the points it finished.

    <output_dir>/grid_progress/
        identity.json                      what the points depend on (`grid_identity`);
                                           another identity discards the progress
        restarts/lr<lr>-seed<seed>/        a finished point: its dev predictions, as the
                                           outputs' restarts/ keep them, and point.json
                                           (its entry of metrics.json's grid), written last
        best-lr<lr>-seed<seed>.weights.h5  the weights of the best point so far, for the
                                           best run's outputs (test predictions, export)

The directory goes once the run's outputs are in place. A point interrupted before its
point.json is trained again from the start.

Points can also come from elsewhere: a harness that kept another machine's finished
points (reproduce.partial) adds them (`GridProgress.add`) under the identity this run
computes (`glue_suite.run.grid_identity_of`), vouching that they belong to the same
command. Their weights stay behind, so where such a point is the best, the outputs are
written from its predictions (`glue_suite.run`).
"""

import dataclasses
import glob
import json
import os
import shutil
from typing import Optional

import keras
import tensorflow as tf

from bert_tf import files, provenance
from glue_suite import predictions

PROGRESS = "grid_progress"
POINT = "point.json"
# Settings that change no grid point's result: where the outputs go, the cache of the
# featurized splits, and the grid itself (its points are matched one by one).
_NOT_IN_IDENTITY = ("output_dir", "overwrite", "export_dir", "cache_dir", "predict_test",
                    "learning_rates", "learning_rate_grid", "seeds")


def grid_identity(config, checkpoint_directory: str) -> dict:
    """What a grid point's result depends on besides its learning rate and seed: the run's
    settings, the init checkpoint's files (names, sizes, modification times) and the code
    (`provenance.git_commit`). JSON-ready."""
    settings = {k: v for k, v in dataclasses.asdict(config).items()
                if k not in _NOT_IN_IDENTITY}
    settings["train"] = {k: v for k, v in settings["train"].items() if k != "verbose"}
    code = provenance.git_commit()
    return json.loads(json.dumps({
        "settings": settings, "checkpoint": _files_identity(checkpoint_directory),
        "code": {k: code[k] for k in ("commit", "diff_sha256")}}, default=str))


def _files_identity(directory: str) -> list:
    """[name, size, modification time] of the files in `directory` (not below it: every
    checkpoint format keeps its weights, config and vocabulary at the top)."""
    identity = []
    for name in sorted(tf.io.gfile.listdir(directory)):
        path = os.path.join(directory, name)
        if not tf.io.gfile.isdir(path):
            stat = tf.io.gfile.stat(path)
            identity.append([name, stat.length, stat.mtime_nsec])
    return identity


class GridProgress:
    """The finished points of one output directory's grid (see the module docstring)."""

    def __init__(self, output_dir: str, identity: dict):
        self.root = os.path.join(output_dir, PROGRESS)
        identity_path = os.path.join(self.root, "identity.json")
        self.discarded = False
        if os.path.isdir(self.root) and (not os.path.exists(identity_path) or
                                         files.read_json(identity_path) != identity):
            shutil.rmtree(self.root)  # made by other settings, checkpoint or code
            self.discarded = True
        os.makedirs(self.root, exist_ok=True)
        if not os.path.exists(identity_path):
            files.write_json(identity_path, identity, sort_keys=True)

    def point_dir(self, learning_rate: float, seed: int) -> str:
        return predictions.restart_dir(self.root, learning_rate, seed)

    def finished(self, learning_rate: float, seed: int) -> Optional[dict]:
        """The point's grid entry, if an earlier run finished it."""
        path = os.path.join(self.point_dir(learning_rate, seed), POINT)
        return files.read_json(path) if os.path.exists(path) else None

    def add(self, source: str) -> bool:
        """Takes a point finished elsewhere (a directory laid out as `point_dir`'s, its
        point.json included); False where this grid has the point already."""
        entry = files.read_json(os.path.join(source, POINT))
        target = self.point_dir(entry["learning_rate"], entry["seed"])
        if self.finished(entry["learning_rate"], entry["seed"]) is not None:
            return False
        os.makedirs(target, exist_ok=True)
        names = sorted(os.listdir(source))
        for name in [n for n in names if n != POINT] + [POINT]:  # point.json last
            shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
        return True

    def save(self, entry: dict, best_model: Optional[keras.Model]) -> None:
        """Marks a point finished (its predictions are in `point_dir` already); with
        `best_model` (it is the best point so far) keeps its weights, in place of the
        previous best's: saved before the point counts as finished, so the best finished
        point has its weights whenever a run keeps them (glue_suite.run: when test
        predictions or an export need the best model)."""
        lr, seed = entry["learning_rate"], entry["seed"]
        if best_model is not None:
            best_model.save_weights(self._weights_path(lr, seed))
        files.write_json(os.path.join(self.point_dir(lr, seed), POINT), entry)
        if best_model is not None:
            for path in glob.glob(os.path.join(self.root, "best-*.weights.h5")):
                if path != self._weights_path(lr, seed):
                    os.remove(path)

    def best_weights(self, learning_rate: float, seed: int) -> Optional[str]:
        path = self._weights_path(learning_rate, seed)
        return path if os.path.exists(path) else None

    def copy_restarts(self, points: list, directory: str) -> list[str]:
        """Copies the points' predictions to `directory`/restarts; returns the paths."""
        written = []
        for lr, seed in points:
            source, target = self.point_dir(lr, seed), predictions.restart_dir(directory, lr, seed)
            os.makedirs(target, exist_ok=True)
            for name in sorted(os.listdir(source)):
                if name != POINT:
                    shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
                    written.append(os.path.join(target, name))
        return written

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _weights_path(self, learning_rate: float, seed: int) -> str:
        return os.path.join(self.root, f"best-lr{learning_rate:g}-seed{seed}.weights.h5")


def finished_point_dirs(output_dir: str) -> list[str]:
    """The directories of the points an output directory's grid has finished so far
    (whatever its identity), in name order."""
    pattern = os.path.join(output_dir, PROGRESS, predictions.RESTARTS, "*", POINT)
    return [os.path.dirname(p) for p in sorted(glob.glob(pattern))]
