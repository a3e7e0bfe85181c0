"""`--help` of every binary: its usage, then its flags grouped by subject.

absl's own `--help` lists a binary's flags in one alphabetical block under the module's path;
here they come in the order a user looks for them (what to train on, how long, where it is
kept, on which devices, in which cluster: cifar10.settings.SUBJECTS), each group
alphabetical. A flag's subject is part of its declaration (cifar10.settings, or the
`subject=` of harness.command_line.flag_ranges' definitions); a flag without one lands under "Other
flags". `--helpfull` stays absl's: every flag of every module, absl's
own included.
"""

import os
import sys
import textwrap

from cifar10 import settings
from tfbits import process_end

WIDTH = 80


def _subject_of(flag):
  """The subject a flag's definition gave it (flag_ranges, cifar10.settings)."""
  return getattr(flag, "subject", None) or "Other flags"


def _entry(flag):
  """`  --name=DEFAULT` and its help, indented, wrapped at WIDTH."""
  if flag.boolean:
    head = f"  --[no]{flag.name}" + (" (on by default)" if flag.default else "")
  elif flag.default is None:
    head = f"  --{flag.name}"
  else:
    head = f"  --{flag.name}={flag.default_as_str.strip(chr(39))}"
  help_text = " ".join((flag.help or "").split())
  syntax = getattr(flag.parser, "syntactic_help", "")
  if syntax and syntax not in ("an integer", "a number", "a string"):
    help_text += f" ({syntax})"  # a range (flag_ranges), or the values an enum takes
  body = textwrap.fill(help_text, WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6)
  return f"{head}\n{body}" if body else head


def text(doc, fv, names):
  """The help of a binary whose docstring is `doc` and whose own flags are `names` in `fv`."""
  groups = {}
  for name in sorted(names):
    groups.setdefault(_subject_of(fv[name]), []).append(_entry(fv[name]))
  order = list(settings.SUBJECTS) + ["Other flags"]
  parts = [(doc or "").strip()]
  for subject in order:
    if subject in groups:
      parts.append(f"{subject}:\n" + "\n".join(groups[subject]))
  parts.append("--flagfile=FILE reads flags from FILE, one per line.\n"
               "--helpfull lists every flag, absl's own included.")
  return "\n\n".join(parts) + "\n"


def print_help(doc, fv, names, module=None, full=False):
  """Prints the help of the running binary, whose docstring is `doc`, on standard output:
  its own flags by subject, or (`full`) after them every module's flags, absl's included.
  Run as a console script (`cifar10-train`), the docstring's `python -m <module>` reads as
  the script's name, the command the user typed."""
  shown = text(doc, fv, names)
  if full:
    shown += "\nEvery flag, by the module that defines it:\n\n" + fv.get_help() + "\n"
  script = os.path.basename(sys.argv[0] or "")
  if module and script.startswith("cifar10-"):
    shown = shown.replace(f"python -m {module}", script)
  process_end.write_out(shown)
