"""Which package may import which: the layers README's "Where things are" states, held to the
code. Before: the porting kit, said to import nothing of the project, had become the ground the
trainers stood on (cifar10/model.py imported porting.gates, strategies/step.py its
replica_mean, seven harness modules its machine, filesystems or PortError): a change to the kit
for a team's model could change the trainers' bits."""

import ast
import os

import pytest

from tests import helpers

# Each package and the packages of this project it may import (what it imports of them,
# README says).
MAY_IMPORT = {
    "tfbits": set(),
    "porting": {"tfbits"},
    "cifar10": {"tfbits"},
    "harness": {"cifar10", "tfbits"},
    "strategies": {"cifar10", "harness", "tfbits"},
    "compat_v1": {"cifar10", "harness", "tfbits"},
    "examples": {"cifar10", "harness", "tfbits", "strategies"},
    "equivalence": {"cifar10", "harness", "tfbits", "strategies", "compat_v1", "porting",
                    "examples"},
    "benchmarks": {"cifar10", "harness", "tfbits", "strategies", "compat_v1", "porting",
                   "examples"},
}


def _imports(package):
  """{(imported package, file)} of `package`'s modules, module-level or inside functions."""
  found = set()
  for folder, _, files in os.walk(os.path.join(helpers.REPO, package)):
    for name in files:
      if not name.endswith(".py"):
        continue
      path = os.path.join(folder, name)
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
      for node in ast.walk(tree):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                   [node.module] if isinstance(node, ast.ImportFrom) and not node.level
                   and node.module else [])
        for module in modules:
          top = module.split(".")[0]
          if top in MAY_IMPORT and top != package:
            found.add((top, os.path.relpath(path, helpers.REPO)))
  return found


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_a_package_imports_only_the_layers_below_it(package):
  wrong = sorted((f, top) for top, f in _imports(package) if top not in MAY_IMPORT[package])
  assert not wrong, f"{package} may import {sorted(MAY_IMPORT[package])}: {wrong}"


def test_the_trainers_import_nothing_of_the_porting_kit():
  for package in ("cifar10", "harness", "strategies", "compat_v1"):
    assert not [f for top, f in _imports(package) if top == "porting"], package
