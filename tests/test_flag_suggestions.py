"""A misspelt flag is answered with the flag a user means (issue: `--gpus=2` was offered
gpu_memory_limit_mb, absl's nearest by edit distance, not num_gpus)."""

from harness.command_line import cli
from tests import helpers


def test_a_word_typed_whole_suggests_the_flags_that_hold_it():
  names = ["num_gpus", "gpu_memory_limit_mb", "visible_gpus", "max_steps", "decay_steps"]
  absl = "Unknown command line flag 'gpus'. Did you mean: gpu_memory_limit_mb ?"
  assert cli.suggested(absl, names) == (
      "Unknown command line flag 'gpus'. Did you mean: num_gpus, visible_gpus ?")
  assert cli.suggested("Unknown command line flag 'steps'. Did you mean: max_steps ?",
                       names).endswith("Did you mean: max_steps, decay_steps ?")
  # Nothing holds the word: absl's own line, as it was; other errors untouched.
  odd = "Unknown command line flag 'nmu_gpus'. Did you mean: num_gpus ?"
  assert cli.suggested(odd, names) == odd
  assert cli.suggested("flag --max_steps=x: invalid literal", names) == (
      "flag --max_steps=x: invalid literal")


def test_the_trainer_answers_gpus_with_num_gpus_in_one_line():
  result = helpers.run("strategies.train", "--gpus=2", timeout=120)
  line = helpers.check_one_line(result, "Unknown command line flag 'gpus'")
  assert line.endswith("Did you mean: num_gpus, visible_gpus ?"), line
