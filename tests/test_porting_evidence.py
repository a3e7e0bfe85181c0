"""What the kit knows of a side, as declared facts (porting.evidence): a fact not declared
cannot be set, a fact never set is absent, and None is a value (a probe measured as unable to
say), not an absence."""

import json
import os

import pytest

import porting
from porting import evidence
from porting.trace import Trace
from tests import dropout_adam_port as drop


def test_a_fact_not_declared_is_an_error_not_a_silent_key():
  facts = evidence.Evidence()
  with pytest.raises(KeyError, match="'update_op' is no fact the kit declares"):
    facts["update_op"] = "first_tower"  # a typo of update_ops
  with pytest.raises(KeyError):
    Trace([], [], facts={"fused_batchnorm": True})


def test_absent_is_not_none():
  facts = evidence.Evidence.of({"probes": None})
  assert "probes" in facts and facts["probes"] is None
  assert facts.get("probes", {}) is None  # measured: the probe could not say
  assert "structure" not in facts and facts.get("structure", {}) == {}
  with pytest.raises(KeyError):
    facts["structure"]  # pylint: disable=pointless-statement
  assert facts.setdefault("global_steps", []) == [] and "global_steps" in facts
  assert facts.as_dict() == {"probes": None, "global_steps": []}


def test_each_fact_is_read_measured_or_where_the_run_was():
  kinds = {f.metadata["kind"] for f in evidence.dataclasses.fields(evidence.Evidence)}
  assert kinds == {"read", "measured", "where"}


def test_a_record_with_a_fact_a_later_kit_no_longer_declares_still_replays(tmp_path):
  from porting import record  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "record")
  header_path = record.write(drop.port(), drop.batches(1), path, replicas=1, steps=1)
  with open(header_path, encoding="utf-8") as f:
    header = json.load(f)
  header["facts"]["a_fact_of_an_older_kit"] = 1
  with open(header_path, "w", encoding="utf-8") as f:
    json.dump(header, f)
  report = porting.compare(drop.port(), record=path, steps=1)
  assert report.equal and "a_fact_of_an_older_kit" not in report.tf1.facts
  assert os.path.isdir(path)
