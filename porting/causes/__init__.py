"""The known causes of a difference, one rule each: a function of the typed Observations
(porting.diagnosis) that returns its line(s) where its signature fits the numbers, [] where
it does not. porting.diagnosis.RULES runs them in the order the report lists them.

  towers        TF1 towers after the first that count their losses otherwise than tower 0
  scale         gradients N x or 1/N the towers' average, or all one other factor; only the
                losses apart by rounding; the regularization counted N times or missing; a
                penalty on one side only (or stronger there); N not a power of two
  shares        the same update, its loss shared out otherwise over towers and replicas (a
                penalty on one tower against a share on each replica)
  batch_norm    a fused TF1 batch norm; the moving statistics of another tower; moving
                averages that differ by their update's rounding
  gradients     only bias gradients apart where oneDNN fuses; a tensor used k times whose
                gradient terms are summed in another order; only gradients 0 up to rounding
  updates       weights apart further than their gradients move them (where the bits part)
  optimizers    the learning rate's decay; Adam's 1 - beta and beta powers; momentum's
                accumulator; RMSProp's mean square from ones; an
                embedding's sparse update
  averages      the EMA: read at another point of the step; apart only as far as the weights
                they average
  machines      a TF1 side recorded on another TensorFlow, kernel family or CPU
  precision     the two sides computing in other dtypes (float16 towers, a float32 port);
                every difference within float16's rounding where either computes in it

Each reads "rounding" at the comparison's precision (Observations.bound: porting.precision).
"""
