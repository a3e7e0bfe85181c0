"""`--help` of every binary: its usage, then its flags grouped by subject.

absl's own `--help` lists a binary's flags in one alphabetical block under the module's path;
here they come in the order a user looks for them (what to train on, how long, where it is
kept, on which devices, in which cluster), each group alphabetical. A flag no subject names
lands under "Other flags". `--helpfull` stays absl's: every flag of every module, absl's
own included.
"""

import os
import sys
import textwrap

# Subject -> the flags it holds, in the order --help shows the subjects.
SUBJECTS = (
    ("Data", ("dataset", "data_dir", "download", "seed", "batch_size", "eval_data",
              "num_examples")),
    ("Schedule", ("max_steps", "learning_rate", "decay_steps", "decay_steps_per_global_batch",
                  "ema_reads", "steps")),
    ("Checkpoints, summaries and logs", (
        "train_dir", "init_from", "override_run_config", "save_checkpoint_steps",
        "max_checkpoints_to_keep", "save_summaries_steps", "log_frequency", "profile_steps",
        "preemption_exit_code", "checkpoint_dir", "eval_dir", "run_once",
        "eval_interval_secs")),
    ("Export and prediction", ("export_dir", "version", "weights", "overwrite", "model",
                               "top_k")),
    ("Devices and precision", (
        "num_gpus", "strategy", "all_reduce", "cpu_only", "visible_gpus", "allow_growth",
        "per_process_gpu_memory_fraction", "gpu_memory_limit_mb", "log_device_placement",
        "allow_soft_placement", "intra_op_threads", "inter_op_threads", "deterministic",
        "precision", "use_fp16", "loss_scale", "jit_compile", "steps_per_loop")),
    ("Clusters", (
        "cluster_resolver", "peer_timeout_secs", "ps_partition_min_bytes", "slurm_port_base",
        "slurm_ps_tasks", "evaluator_num_examples", "job_name", "ps_hosts", "worker_hosts",
        "task_index", "sync_replicas", "workers", "ps", "timeout_secs")),
)
WIDTH = 80


def _subject_of(name):
  for subject, names in SUBJECTS:
    if name in names:
      return subject
  return "Other flags"


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
    help_text += f" ({syntax})"  # a range (harness.flag_ranges), or the values an enum takes
  body = textwrap.fill(help_text, WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6)
  return f"{head}\n{body}" if body else head


def text(doc, fv, names):
  """The help of a binary whose docstring is `doc` and whose own flags are `names` in `fv`."""
  groups = {}
  for name in sorted(names):
    groups.setdefault(_subject_of(name), []).append(_entry(fv[name]))
  order = [s for s, _ in SUBJECTS] + ["Other flags"]
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
  sys.stdout.write(shown)
  sys.stdout.flush()
