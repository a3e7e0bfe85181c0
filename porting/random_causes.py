"""The random-draw causes of a difference: randomness the two sides do not share, read where
the numbers show it (a loss or output that differs at step 0, from the same weights and
batch) against what each side drew (porting.random_ops)."""


def causes(bad, facts1, facts2):
  """Randomness the two sides do not share, where the numbers show it: a loss or output
  differs at step 0 (the same weights and batch went in)."""
  forward = [r for r in bad if r.step == 0 and r.kind in ("loss", "outputs")]
  if not forward:
    return []
  draws1, draws2 = facts1.get("random_draws", {}), facts2.get("random_draws", {})
  escaped = facts1.get("random_escaped", []) + facts2.get("random_escaped", [])
  if facts1.get("random_ops") == "as_written" and (escaped or draws1 or draws2):
    return ["random ops drawn as written (random_ops='as_written'): the TF1 graph's stateful "
            "draws and the port's own draw different numbers, so the forward pass differs "
            f"from step 0 ({len(escaped)} random op(s): {', '.join(escaped[:3])}); "
            "random_ops='aligned' makes tower i and replica i draw the same numbers"]
  if escaped:
    return [f"random ops the kit does not align ({', '.join(escaped[:3])}): only uniform, "
            "normal and truncated-normal draws (tf.random, tf.compat.v1, dropout) are drawn "
            "alike on both sides; a forward output differs from step 0"]
  kinds1 = [k for k, _ in draws1.get(0, [])]
  kinds2 = [k for k, _ in draws2.get(0, [])]
  if kinds1 != kinds2:
    return [f"the two sides draw differently: TF1 tower 0 draws {_draws(kinds1)}, TF2 "
            f"replica 0 {_draws(kinds2)} (a dropout on one side only, a rate of 0 on one, "
            "or layers in another order): a forward output differs from step 0"]
  return []


def _draws(kinds):
  return f"{len(kinds)} time(s) ({', '.join(kinds)})" if kinds else "nothing"
