"""plot_pretraining reads a trainer's metrics.csv and writes a PNG."""

import pytest

from bert_tf import plot_pretraining

HEADER = ("step,split,loss,mlm_loss,mlm_accuracy,mlm_perplexity,nsp_loss,nsp_accuracy,"
          "learning_rate,grad_norm,examples_per_second,elapsed_seconds\n")


def test_plot_writes_png(tmp_path):
    rows = [f"{s},train,7,6,0.{s},400,0.6,0.5{s},1e-4,1,30,{s}\n" for s in (10, 20, 30)]
    rows += ["20,eval,7,6,0.2,500,0.6,0.55,,,,\n", "30,eval,7,6,0.3,450,0.6,0.56,,,,\n",
             "30,eval,7,6,0.3,440,0.6,0.56,,,,\n"]  # a resumed run repeats a step
    (tmp_path / "metrics.csv").write_text(HEADER + "".join(rows))
    plot_pretraining.main(["--model_dir", str(tmp_path)])
    png = (tmp_path / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_empty_metrics_is_an_error(tmp_path):
    (tmp_path / "metrics.csv").write_text(HEADER)
    with pytest.raises(ValueError, match="no rows"):
        plot_pretraining.main(["--model_dir", str(tmp_path)])
