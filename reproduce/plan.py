"""The experiment plan: the runs of a scale, and the planner that adds them.

A plan is an ordered dict of `Run`s (dependencies first). Each run is one command line
of a project CLI, run as a subprocess, and names the table cells its result fills:

    data       python -m bert_tf.create_pretraining_data ...   -> shards + metadata.json
    pretrain   python -m bert_tf.pretrain ...                  -> metrics.csv, eval_results.json, export/
    finetune   python -m glue_suite.run ...                    -> metrics.json

Data flow: `reproduce.experiments` asks a `Planner` for the runs each table needs; the
planner builds each run's command (`reproduce.commands`), estimate
(`reproduce.cost_model`) and availability (`reproduce.availability`); `reproduce.runner`
executes the plan and `reproduce.records` keeps one record per run, from which
`reproduce.tables` builds the tables.

Runs that several tables need are planned once: the ablation model pretrained with
MLM+NSP is Table 5's "BERT-BASE" row, one of Table 6's sizes, Table 8's 80/10/10 row and
Figure 5's MLM curve, and its MRPC fine-tuning fills both Table 5 and Table 6.
"""

import dataclasses
import fnmatch
import os
import shlex
from typing import Optional

from glue_suite.tasks import TaskSizes, get_task
from reproduce import cost_model, models
from reproduce import paper_numbers as paper
from reproduce.availability import corpus_bytes, find_data, find_train, missing_data
from reproduce.commands import (BILSTM_UNITS_DEFAULT, TPU_STEPS_PER_EXECUTION, DataCommand,
                                Distribution, FinetuneCommand, PretrainCommand, distribution)
from reproduce.scales import VOCABS, Finetune, Pretraining, Scale

PAPER_RATES = paper.PRETRAINING["mask_rates"]  # 80% [MASK], 10% same, 10% random
SEQ = paper.PRETRAINING["phase1_seq_length"]  # every pretraining run's first phase
LONG_SEQ = paper.PRETRAINING["phase2_seq_length"]
PREDICTIONS = paper.PRETRAINING["max_predictions_per_seq"]  # seq -> masked positions


@dataclasses.dataclass(frozen=True)
class Cell:
    """One table cell a run fills: `metric` is the key in the run's metrics
    (glue_suite's metrics.json "metrics", or bert_tf.pretrain's eval_results.json)."""
    table: str
    row: str
    column: str
    metric: str


@dataclasses.dataclass
class Run:
    """One command of the plan.

    Args:
        run_id: unique, also the directory name of its record ("cpu.pretrain.tiny-nsp").
        stage: "data", "pretrain" or "finetune".
        module: the CLI, run as `python -m module *args`.
        args: its flags.
        out_dir: the directory the CLI writes to.
        needs: run_ids whose outputs this run reads (they run first).
        cells: the table cells its result fills.
        info: what tables print beside the numbers (model, settings, data notes).
        estimate_s: estimated seconds; None where no throughput is known.
        unavailable: why it cannot run ("no QQP data", "needs ..."); such a run is
            recorded as n/a with this reason instead of being run.
        config: the typed settings `args` was built from (a `reproduce.commands`
            DataCommand, PretrainCommand or FinetuneCommand); None for a hand-made run.
        rehearsal: {flag: (planned, capped)} of a rehearsal's run (`reproduce.rehearsal`);
            None for a real one.
    """
    run_id: str
    stage: str
    module: str
    args: tuple
    out_dir: str
    needs: tuple = ()
    cells: tuple = ()
    info: dict = dataclasses.field(default_factory=dict)
    estimate_s: Optional[float] = None
    unavailable: Optional[str] = None
    config: Optional[object] = None
    rehearsal: Optional[dict] = None

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", self.module, *self.args])

    @property
    def tables(self) -> tuple:
        return tuple(dict.fromkeys(c.table for c in self.cells))


@dataclasses.dataclass
class Plan:
    """The runs of one scale and strategy (`reproduce.experiments.build_plan`)."""
    scale: str
    strategy: str
    runs: dict  # run_id -> Run, dependencies first
    data_dir: Optional[str] = None  # the benchmark data root: $BERT_DATA_DIR in records

    def select(self, tables) -> "Plan":
        """The runs that fill cells of `tables`, and everything they need."""
        return self.subset([r.run_id for r in self.runs.values()
                            if set(r.tables) & set(tables)])

    def select_runs(self, patterns) -> "Plan":
        """The runs whose id matches one of the shell-style `patterns`, and everything
        they need ("paper.finetune.large-nsp.mrpc", "*.squad2.0-main")."""
        return self.subset([k for k in self.runs
                            if any(fnmatch.fnmatchcase(k, p) for p in patterns)])

    def subset(self, run_ids: list) -> "Plan":
        """These runs and everything they need, in plan order."""
        keep = set()
        stack = list(run_ids)
        while stack:
            run_id = stack.pop()
            if run_id not in keep:
                keep.add(run_id)
                stack.extend(self.runs[run_id].needs)
        return dataclasses.replace(self, runs={k: r for k, r in self.runs.items() if k in keep})

    def total_estimate(self) -> Optional[float]:
        estimates = [r.estimate_s for r in self.runs.values() if not r.unavailable]
        return None if None in estimates else sum(estimates)



@dataclasses.dataclass(frozen=True)
class FinetuneJob:
    """One fine-tuning run, as an experiment asks for it.

    Args:
        task: the glue_suite task fine-tuned and evaluated.
        model: the pretrain run_id whose export it starts from; None for the default
            shipped checkpoint.
        settings: the scale's settings for this task.
        cells: the table cells its result fills.
        variant: a suffix of the run's name, for runs that differ in more than the
            model and task ("bilstm", "features-last").
        head, feature_mode: glue_suite.run's --head / --feature_mode.
        export_step: start from the export at this pretraining step (Figure 5); None
            for the final one.
        train_task: train on this task's data instead (SQuAD v1.1 for v2.0).
        main: a Tables 1-4/7 run; on a model the ablations also fine-tune with other
            settings, it is a separate run ("-main").
    """
    task: str
    model: Optional[str]
    settings: Finetune
    cells: tuple = ()
    variant: str = ""
    head: Optional[str] = None
    feature_mode: Optional[str] = None
    export_step: Optional[int] = None
    train_task: Optional[str] = None
    main: bool = False


def mask_label(rates: tuple) -> str:
    """(0.8, 0.1, 0.1) -> "80/10/10", Table 8's row label."""
    return "/".join(str(round(100 * r)) for r in rates)


def _suffix(rates: tuple, vocab: str) -> str:
    """What a data or pretraining run's name adds for non-default masking or vocabulary."""
    suffix = "" if rates == PAPER_RATES else "-mask" + mask_label(rates).replace("/", "-")
    return suffix + ("" if vocab == "uncased" else f"-{vocab}")


class Planner:
    """Adds runs to a plan: names them, builds their commands, links each to the runs it
    reads, marks what cannot run, and plans a run that several tables need only once.

    Args:
        scale: the settings of every run.
        strategy: passed to every CLI; also picks the throughput of the estimates.
        data_dir: the benchmark data root (absolute).
        work_dir: where the CLIs write their outputs (absolute, or a gs:// URL).
        tpu: --tpu address for --strategy tpu.
        tfds_fallback: there is no data directory (`glue_suite.data_dir.no_data_directory`):
            fine-tuning runs of the tasks tensorflow-datasets has read them from it
            (`_source`); the pretraining corpus has no such fallback.
    """

    def __init__(self, scale: Scale, strategy: str, data_dir: str, work_dir: str,
                 tpu: Optional[str] = None, tfds_fallback: bool = False):
        self.scale, self.strategy, self.tpu = scale, strategy, tpu
        self.data_dir, self.work_dir = data_dir, work_dir
        self.tfds_fallback = tfds_fallback
        self.runs: dict = {}  # run_id -> Run, dependencies first

    def _path(self, *parts) -> str:
        return os.path.join(self.work_dir, *parts)

    def _id(self, stage: str, name: str) -> str:
        return f"{self.scale.name}.{stage}.{name}"

    def add(self, run: Run) -> str:
        """Adds `run`, or adds its cells to the same run planned before."""
        old = self.runs.get(run.run_id)
        if old is None:
            if run.unavailable is None:
                blocked = [self.runs[n].unavailable for n in run.needs if self.runs[n].unavailable]
                run.unavailable = blocked[0] if blocked else None
            self.runs[run.run_id] = run
            return run.run_id
        if old.args != run.args:
            raise AssertionError(f"{run.run_id} planned twice with different commands:\n"
                                 f"{old.command}\n{run.command}")
        old.cells = tuple(dict.fromkeys(old.cells + run.cells))
        return run.run_id

    def model_info(self, model: Optional[str]) -> dict:
        """info["model"] of a pretrain run_id, or of the default checkpoint (None)."""
        if model is None:
            return models.default_checkpoint_info()
        return self.runs[model].info["model"]

    # ------------------------------------------------------------------ data
    def _masks_in_pipeline(self, objective: str) -> bool:
        """Whether the recipe masks the training records of `objective` anew every batch
        (LTR predicts next tokens: nothing to mask)."""
        return self.scale.pretraining.dynamic_masking and objective != "ltr"

    def data(self, objective: str, rates: tuple, vocab: str, seq: int, heldout: bool) -> str:
        """The run_id of a data run. Held-out records are always masked (every model is
        scored on the same predictions); training records are unmasked where the recipe
        masks in the pipeline, and then one set serves every mask mix."""
        s = self.scale
        unmasked = not heldout and self._masks_in_pipeline(objective)
        if unmasked:
            rates = PAPER_RATES
        name = ("heldout-" if heldout else "") + objective + _suffix(rates, vocab)
        name += ("-unmasked" if unmasked else "") + ("" if seq == SEQ else f"-seq{seq}")
        corpus = s.heldout_corpus if heldout else s.train_corpus
        dupe_factor = 1 if heldout else s.dupe_factor
        command = DataCommand(
            input_files=tuple(os.path.join(self.data_dir, "pretraining", p) for p in corpus),
            vocab_file=os.path.join(self.data_dir, VOCABS[vocab]),
            output_dir=self._path(self._id("data", name)), max_seq_length=seq,
            max_predictions_per_seq=PREDICTIONS[seq],
            masked_lm_prob=paper.PRETRAINING["masked_lm_prob"], dupe_factor=dupe_factor,
            short_seq_prob=paper.PRETRAINING["short_seq_prob"],
            random_seed=54321 if heldout else 12345,  # fixed: a rerun writes the same shards
            mask_rates=rates, objective=objective, num_workers=s.data_workers,
            dynamic_masking=unmasked)
        size = corpus_bytes(self.data_dir, corpus)
        unavailable = None
        if size is None:
            unavailable = "no pretraining corpus" + (
                " (no data directory; tfds has fine-tuning data only)"
                if self.tfds_fallback else "")
        elif not os.path.isfile(command.vocab_file):
            unavailable = f"no {vocab} vocabulary"
        return self.add(Run(
            self._id("data", name), "data", command.MODULE, command.argv(), command.output_dir,
            info={"objective": objective, "mask_rates": list(rates), "vocab": vocab,
                  "max_seq_length": seq, "heldout": heldout},
            estimate_s=None if size is None else cost_model.data_seconds(
                size, dupe_factor, s.data_workers),
            unavailable=unavailable, config=command))

    # ------------------------------------------------------------------ pretraining
    def pretrain(self, size: str, objective: str = "nsp", rates: tuple = PAPER_RATES,
                 vocab: str = "uncased", cells: tuple = ()) -> str:
        """The run_id of a pretraining run (with its data runs)."""
        s = self.scale
        recipe = s.pretraining
        data = self.data(objective, rates, vocab, SEQ, heldout=False)
        heldout = self.data(objective, PAPER_RATES, vocab, SEQ, heldout=True)
        needs = [data, heldout]
        phase2 = {}
        if s.phase2:
            long_data = self.data(objective, rates, vocab, LONG_SEQ, heldout=False)
            needs.append(long_data)
            phase2 = dict(
                phase2_train_files=os.path.join(self.runs[long_data].out_dir, "part-*"),
                phase2_seq_length=LONG_SEQ, phase2_max_predictions_per_seq=PREDICTIONS[LONG_SEQ],
                phase2_fraction=round(1 - paper.PRETRAINING["phase1_fraction"], 6))
        name = f"{size}-{objective}" + _suffix(rates, vocab) + (
            f"-{recipe.label}" if recipe.label else "")
        command = PretrainCommand(
            config=size, objective=objective,
            train_files=os.path.join(self.runs[data].out_dir, "part-*"),
            vocab_file=os.path.join(self.data_dir, VOCABS[vocab]),
            model_dir=self._path(self._id("pretrain", name)),
            distribution=self._pretrain_distribution(recipe),
            global_batch_size=recipe.batch_size, num_train_steps=recipe.steps,
            learning_rate=recipe.learning_rate, num_warmup_steps=recipe.warmup_steps,
            max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS[SEQ],
            save_checkpoints_steps=recipe.checkpoint_every,
            eval_files=os.path.join(self.runs[heldout].out_dir, "part-*"),
            eval_every=recipe.eval_every, eval_steps=s.eval_sequences // recipe.batch_size, log_every=s.log_every,
            **phase2, export_steps=self._export_steps(size, objective, rates, vocab),
            ltr_predictions=(s.ltr_predictions or None) if objective == "ltr" else None,
            steps_per_execution=TPU_STEPS_PER_EXECUTION if self.strategy == "tpu" else None,
            dropout=recipe.dropout, **self._masking(objective, rates))
        layers, hidden, heads = models.shape(size)
        info = {"model": {"size": size, "label": models.size_label(size), "layers": layers,
                          "hidden": hidden, "heads": heads,
                          "parameters": models.parameters(size), "objective": objective,
                          "mask_rates": list(rates), "vocab": vocab, "steps": recipe.steps,
                          "ltr_predictions": command.ltr_predictions,
                          "batch_size": recipe.batch_size, "dropout": recipe.dropout}}
        return self.add(Run(self._id("pretrain", name), "pretrain", command.MODULE,
                            command.argv(), command.model_dir, needs=tuple(needs),
                            cells=tuple(cells), info=info,
                            estimate_s=cost_model.pretrain_seconds(command), config=command))

    def _masking(self, objective: str, rates: tuple) -> dict:
        """PretrainCommand's masking flags: none where the records carry the masks."""
        if not self._masks_in_pipeline(objective):
            return {}
        return dict(dynamic_masking=True, mask_rates=None if rates == PAPER_RATES else rates)

    def _pretrain_distribution(self, recipe: Pretraining) -> Distribution:
        """The strategy's, at the recipe's precision where it sets one."""
        chosen = distribution(self.strategy, self.tpu, PretrainCommand.MODULE)
        return dataclasses.replace(chosen, precision=recipe.precision or chosen.precision)

    def _export_steps(self, size, objective, rates, vocab) -> tuple:
        """Intermediate exports for Figure 5: the ablation model's MLM and LTR runs. Known
        here, not asked for by Figure 5, because Table 5 plans the same run first and
        its command must not change."""
        s = self.scale
        if (size, rates, vocab) != (s.ablation_size, PAPER_RATES, "uncased") or \
                objective not in ("nsp", "ltr"):
            return ()
        return tuple(step for step in s.figure5_steps if step < s.pretraining.steps)

    # ------------------------------------------------------------------ fine-tuning
    def finetune(self, job: FinetuneJob) -> Optional[str]:
        """The run_id, or None where the scale does not fine-tune the task."""
        s, task = self.scale, job.task
        if s.tasks is not None and task not in s.tasks:
            return None
        model = self.model_info(job.model)
        variant = self._variant(job)
        run_id = self._id("finetune", self._finetune_name(job, variant))
        out_dir = self._path(run_id)
        units = None  # the BiLSTM's width, where the run has one
        if job.head or job.feature_mode:
            units = (models.shape(model["size"])[1] if s.bilstm_units == "size"
                     else s.bilstm_units or BILSTM_UNITS_DEFAULT)
        source = self._source(task, job.train_task)
        # --bilstm_units only where the scale sets it: the CLI's default stays implicit.
        command = self._finetune_command(job, out_dir,
                                         units if s.bilstm_units else None, source)
        info = {"task": task, "train_task": job.train_task or task, "variant": variant,
                "head": job.head, "feature_mode": job.feature_mode, "bilstm_units": units,
                "pretrain_step": job.export_step, "model": model,
                "settings": dataclasses.asdict(job.settings),
                "data_notes": self._data_notes(job, source) + _model_notes(model)}
        # A model's feature-based runs on the same rows share its cached frozen layers.
        frozen_cached = bool(job.feature_mode) and any(
            r.info.get("feature_mode") and r.info["model"] == model
            and r.info["settings"] == info["settings"] for r in self.runs.values())
        estimate = cost_model.finetune_seconds(command, model["size"],
                                               self._task_sizes(task, source), units,
                                               frozen_cached)
        return self.add(Run(
            run_id, "finetune", command.MODULE,
            command.argv(), out_dir, needs=() if job.model is None else (job.model,),
            cells=tuple(job.cells), info=info, estimate_s=estimate,
            unavailable=self._missing_data(job, source), config=command))

    def _source(self, task: str, train_task: Optional[str] = None) -> Optional[str]:
        """glue_suite.run's --source for a task: "tfds" where there is no data directory
        and tensorflow-datasets has the task and its train task (the CLI's own rule,
        `glue_suite.data_dir.resolve_source`); None (the files) otherwise."""
        names = (get_task(task).tfds_name, get_task(train_task or task).tfds_name)
        return "tfds" if self.tfds_fallback and all(names) else None

    def has_train(self, task: str) -> bool:
        """Whether the task's train split can be read: from tfds or from a file."""
        return self._source(task) == "tfds" or find_train(self.data_dir, task)[0] is not None

    def _data_notes(self, job: FinetuneJob, source: Optional[str]) -> list:
        """What tables print beside the run's numbers about its data."""
        task = job.task
        if source == "tfds":
            names = dict.fromkeys(get_task(t).tfds_name for t in (job.train_task or task, task))
            return [f"from tensorflow-datasets ({', '.join(names)}): no data directory"]
        note = find_train(self.data_dir, job.train_task or task)[1]
        notes = [note] if note else []
        if job.train_task:
            notes.append(f"trained on {get_task(job.train_task).display_name} "
                         f"(no {get_task(task).display_name} train data)")
        return notes

    def _missing_data(self, job: FinetuneJob, source: Optional[str]) -> Optional[str]:
        """Why the run cannot read its data, or None."""
        if source == "tfds":
            return None  # tfds downloads it on first use; offline, the run says how else
        reason = missing_data(self.data_dir, job.task, job.train_task)
        if reason and self.tfds_fallback:
            reason += " (no data directory; not in tfds)"
        return reason

    def _variant(self, job: FinetuneJob) -> str:
        """The job's variant, "main"-prefixed where a main run on a pretrained model uses
        other settings than the ablations' run on the same model and task."""
        ablation = self.scale.features if job.feature_mode else self.scale.ablation.get(job.task)
        if job.main and job.model is not None and job.settings != ablation:
            return "-".join(filter(None, ("main", job.variant)))
        return job.variant

    @staticmethod
    def _finetune_name(job: FinetuneJob, variant: str) -> str:
        """"tiny-nsp.mrpc", "default.conll2003-features-last", "tiny-nsp@500.mnli"."""
        tag = "default" if job.model is None else job.model.split(".", 2)[2]
        if job.export_step is not None:
            tag += f"@{job.export_step}"
        return f"{tag}.{job.task}" + (f"-{variant}" if variant else "")

    def _finetune_command(self, job: FinetuneJob, out_dir: str, bilstm_units: Optional[int],
                          source: Optional[str]) -> FinetuneCommand:
        checkpoint = None
        if job.model is not None:
            export = "export" if job.export_step is None else f"export_{job.export_step}"
            checkpoint = os.path.join(self.runs[job.model].out_dir, export)
        ft = job.settings
        return FinetuneCommand(
            task=job.task, train_task=job.train_task, init_checkpoint=checkpoint,
            data_dir=self.data_dir, source=source, output_dir=out_dir,
            cache_dir=self._path("glue_cache"),
            distribution=distribution(self.strategy, self.tpu, FinetuneCommand.MODULE),
            seeds=ft.seeds, epochs=ft.epochs, batch_size=ft.batch_size,
            max_train_examples=ft.max_train_examples, max_eval_examples=ft.max_eval_examples,
            learning_rates=ft.learning_rates, bilstm_units=bilstm_units, head=job.head,
            feature_mode=job.feature_mode)

    def _task_sizes(self, task: str, source: Optional[str]) -> TaskSizes:
        """The task's example counts in the data at hand, for the estimate."""
        sizes = get_task(task).sizes
        if source == "tfds":
            return sizes  # the full official sets
        if task == "mnli" and find_train(self.data_dir, "mnli")[1]:
            sizes = sizes._replace(train=20_000)  # the 20k-pair subset stands in
        if task == "mnli" and not find_data(self.data_dir, "mnli", "test_matched")[0]:
            sizes = sizes._replace(test=1104)  # without the test files: only AX is predicted
        return sizes


def _model_notes(model: dict) -> list:
    """What tables print beside the run's numbers about its pretrained model."""
    if model.get("ltr_predictions"):
        return [f"LTR pretrained on {model['ltr_predictions']} sampled next-token "
                f"predictions per sequence (the paper: every position)"]
    return []
