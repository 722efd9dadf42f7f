"""determined.util: the helpers Determined's examples import."""
from typing import Any, List

import pytest

import determined as det
from determined.util import download_gcs_blob_with_backoff, is_overridden, merge_dicts


class FlakyBlob:
    name = "imagenet/train-0001"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def download_as_string(self) -> bytes:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("503 from storage.googleapis.com")
        return b"record bytes"


def test_a_blob_is_downloaded_after_transient_failures_with_capped_backoff() -> None:
    waits: List[float] = []
    blob = FlakyBlob(failures=6)
    assert download_gcs_blob_with_backoff(blob, max_backoff=20, _sleep=waits.append) == b"record bytes"
    assert blob.calls == 7 and len(waits) == 6
    assert 1 <= waits[0] < 2 and 16 <= waits[4] < 17 and waits[5] == 20  # 2**n + jitter, capped


def test_retries_run_out_with_the_last_error_and_leave_the_random_state_alone() -> None:
    import random

    random.seed(7)
    expected = random.random()
    random.seed(7)
    with pytest.raises(RuntimeError, match="imagenet/train-0001.*failed 3 time.*503"):
        download_gcs_blob_with_backoff(FlakyBlob(failures=10), n_retries=3, _sleep=lambda s: None)
    assert random.random() == expected
    with pytest.raises(TypeError, match="google.cloud.storage Blob, got str"):
        download_gcs_blob_with_backoff("gs://bucket/key")


def test_merge_dicts_merges_nested_dicts_into_a_new_one() -> None:
    base = {"zero_optimization": {"stage": 1, "offload": {"device": "cpu"}}, "train_batch_size": 16}
    source = {"zero_optimization": {"stage": 3}, "fp16": {"enabled": True}, "train_batch_size": 32}
    merged = merge_dicts(base, source)
    assert merged == {"zero_optimization": {"stage": 3, "offload": {"device": "cpu"}}, "train_batch_size": 32,
                      "fp16": {"enabled": True}}
    assert base["zero_optimization"]["stage"] == 1 and "fp16" not in base
    merged["fp16"]["enabled"] = False
    assert source["fp16"]["enabled"] is True


def test_is_overridden_and_the_attribute_on_the_package() -> None:
    class Base:
        def build(self) -> Any:
            return None

    class Own(Base):
        def build(self) -> Any:
            return 1

    class Inherits(Base):
        pass

    assert is_overridden(Own().build, Base) and not is_overridden(Inherits().build, Base)
    assert not is_overridden(3, Base)
    assert det.util.merge_dicts({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
