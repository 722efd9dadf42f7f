import pytest

from determined.config import InvalidExperimentConfig, length_to_batches, load_experiment_config


@pytest.mark.parametrize(
    "length, gbs, rpe, batches",
    [
        ({"batches": 7}, 32, 0, 7),
        ({"records": 1000}, 32, 0, 31),
        ({"records": 31}, 32, 0, 0),
        ({"epochs": 2}, 32, 1000, 62),
        ({"epochs": 3}, 64, 60000, 2812),
    ],
)
def test_length_to_batches(length, gbs, rpe, batches):
    assert length_to_batches(length, gbs, rpe) == batches


def test_length_to_batches_errors():
    with pytest.raises(ValueError, match="records_per_epoch must be a positive int"):
        length_to_batches({"epochs": 1}, 32, 0)
    with pytest.raises(ValueError, match="global_batch_size must be a positive int"):
        length_to_batches({"records": 100}, 0, 0)
    with pytest.raises(ValueError, match="exactly one of records, batches, epochs"):
        length_to_batches({"records": 100, "batches": 3}, 32, 0)


@pytest.mark.parametrize(
    "length",
    [{"batches": 1, "epochs": 1}, {}, {"steps": 10}, 0, "100", [{"batches": 1}]],
)
def test_bad_lengths_say_give_exactly_one(with_searcher, length):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(with_searcher(name="single", max_length=length))
    (problem,) = info.value.problems
    assert problem.startswith("searcher.max_length: got ")
    assert "give exactly one of records, batches, epochs" in problem


@pytest.mark.parametrize("amount", [-1, 1.5, "3", True, None])
def test_bad_length_amounts(minimal, amount):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(min_validation_period={"records": amount}))
    (problem,) = info.value.problems
    assert problem.startswith("min_validation_period.records: got ")


def test_periods_accept_zero_and_integral_floats(minimal):
    config = load_experiment_config(
        minimal(min_validation_period={"records": 0}, min_checkpoint_period={"batches": 10.0})
    )
    assert config["min_validation_period"] == {"records": 0}
    assert config["min_checkpoint_period"] == {"batches": 10}
    assert isinstance(config["min_checkpoint_period"]["batches"], int)
