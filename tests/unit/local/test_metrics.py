from airflow_dist_training.local.metrics import MetricParser


def test_last_value_wins_and_series_is_kept() -> None:
    parser = MetricParser([("loss", r"loss=([0-9.]+)"), ("acc", r"accuracy=(\S+)")])
    for line in ["epoch=0 loss=0.9 accuracy=0.5", "noise", "epoch=1 loss=0.4 accuracy=nan?", "loss=0.3"]:
        parser.feed(line, host="algo-1")
    assert parser.final == {"loss": 0.3, "acc": 0.5}
    assert [p.value for p in parser.series if p.name == "loss"] == [0.9, 0.4, 0.3]


def test_regex_without_group_uses_the_whole_match() -> None:
    parser = MetricParser([("n", r"\d+\.\d+")])
    parser.feed("value 3.25 here", host="algo-2")
    assert parser.final == {"n": 3.25}
    assert parser.series[0].host == "algo-2"
