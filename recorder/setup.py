"""The porting kit's recorder, on its own: `pip install ./recorder` from a checkout, run by the
Python of the environment where the team's TF1 code runs (TensorFlow 1.15 on Python 3.7, or
any 2.x). The project itself needs Python 3.10 and TensorFlow 2.21; the recorder needs neither:
it declares no dependency, so pip leaves that environment's TensorFlow as it is, and it is a
setup.py (no pyproject.toml), so the setuptools already there builds it, offline.

It installs the `porting` package of this checkout and `tfbits`, the one package of the
project the kit imports; the record path imports only those, the standard library, numpy and
the TensorFlow it finds (tests/test_porting_recorder.py holds it to that).
"""

import os
import shutil

import setuptools

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

if not os.path.isfile(os.path.join(ROOT, "porting", "__init__.py")):
  # pip before 21.3 builds a copy of this folder elsewhere, without the checkout around it.
  raise SystemExit("error: the recorder builds from its place in a checkout; upgrade pip "
                   "(21.3 or later builds in place): python -m pip install 'pip>=21.3'")

# setuptools keeps build/lib between builds: a module since moved or removed would ride along.
shutil.rmtree(os.path.join(HERE, "build"), ignore_errors=True)

setuptools.setup(
    name="tf1-porting-recorder",
    version="0.1.0",
    description="Records a team's TF1 towers where their TensorFlow runs, for the porting "
                "kit's compare --record",
    license="Apache-2.0",
    python_requires=">=3.7",
    package_dir={"": os.path.relpath(ROOT, HERE)},
    packages=setuptools.find_packages(ROOT, include=["porting", "porting.*", "tfbits",
                                                     "tfbits.*"]),
    # The build's leftovers stay in this folder (ignored by git), none beside the project's.
    options={"egg_info": {"egg_base": HERE}},
)
