"""Keras optimizers that step as TF1's `tf.compat.v1.train` optimizers step, to the bit.

A faithful Keras port of a TF1 optimizer is not the same arithmetic:
- Adam: TF1's AdamOptimizer keeps running products `beta1_power *= beta1` (float32, one
  multiply per step) where Keras computes `beta_1 ** t`, which rounds differently from the
  third step on (measured: weights 3.4e-6 apart at step 2); and Keras computes `1 - beta` in
  Python floats where TF1's kernel does it in float32;
- Momentum: TF1 keeps `accum = m accum + g` and steps `-lr accum`, Keras SGD `v = m v - lr g`;
- RMSProp: TF1 starts its `rms` slot at 1.0, Keras at 0; Adagrad its accumulator at 0.1,
  without an epsilon.

These optimizers run TF1's own kernels (ApplyAdam, ApplyMomentum, ApplyRMSProp,
ApplyCenteredRMSProp, ApplyAdagrad) on the Keras model's variables, with TF1's slots (named as
TF1 names them: m, v, momentum, rms, mg, accumulator) and TF1's defaults, so a port trains as
its TF1 code trained and its slots convert both ways. They are Keras optimizers for the
TensorFlow backend (`model.fit`, a custom loop, tf.distribute).

  optimizer = porting.optimizers.TF1Adam(0.001)   # tf.compat.v1.train.AdamOptimizer(0.001)
"""

import tensorflow as tf

from porting import errors

keras = errors.keras_for("porting.optimizers")  # on TF 1.15 (the recorder): one line, not a crash

_raw = tf.raw_ops


class _TF1Optimizer(keras.optimizers.Optimizer):
  """TF1_CLASS's kernel on each variable; SLOTS: ((TF1 slot kind, its initial value), ...)."""
  TF1_CLASS = None
  SLOTS = ()

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._tf1_slots = {}
    for kind, initial in self.SLOTS:
      self._tf1_slots[kind] = self.add_optimizer_variables(
          var_list, kind, initializer=keras.initializers.Constant(initial))
    self._build_non_slots()

  def _build_non_slots(self):
    pass

  def _slot(self, kind, variable):
    return self._tf1_slots[kind][self._get_variable_index(variable)].value.handle

  def _scalar(self, value, variable):
    return tf.cast(value, variable.dtype)

  def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
    super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
    self._finish(distribution)

  def _finish(self, distribution):
    """After every variable's update (TF1's Optimizer._finish)."""

  def tf1_settings(self):
    """{TF1 attribute: value}: what porting.hyperparameters compares with the TF1 optimizer."""
    return {}

  def tf1_non_slots(self):
    """{TF1 variable name: variable} of the state TF1 keeps beside the slots (Adam's beta
    powers), which porting.checkpoints converts as it is."""
    return {}


class TF1Adam(_TF1Optimizer):
  """tf.compat.v1.train.AdamOptimizer(learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8):
  ApplyAdam, with the running beta1_power/beta2_power TF1 keeps."""
  TF1_CLASS = "AdamOptimizer"
  SLOTS = (("m", 0.0), ("v", 0.0))

  def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
               use_nesterov=False, name="TF1Adam", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self._beta1, self._beta2, self._epsilon = beta1, beta2, epsilon
    self._use_nesterov = use_nesterov

  def _build_non_slots(self):
    self.beta1_power = self.add_variable((), keras.initializers.Constant(self._beta1),
                                         name="beta1_power")
    self.beta2_power = self.add_variable((), keras.initializers.Constant(self._beta2),
                                         name="beta2_power")

  def update_step(self, gradient, variable, learning_rate):
    s = lambda value: self._scalar(value, variable)
    _raw.ResourceApplyAdam(
        var=variable.handle, m=self._slot("m", variable), v=self._slot("v", variable),
        beta1_power=s(self.beta1_power.value.read_value()),
        beta2_power=s(self.beta2_power.value.read_value()), lr=s(learning_rate),
        beta1=s(self._beta1), beta2=s(self._beta2), epsilon=s(self._epsilon),
        grad=gradient, use_nesterov=self._use_nesterov)

  def _finish(self, distribution):
    for power, beta in ((self.beta1_power, self._beta1), (self.beta2_power, self._beta2)):
      distribution.extended.update(
          power.value, lambda p, b=beta: p.assign(p * tf.cast(b, p.dtype)), group=False)

  def tf1_settings(self):
    return {"_beta1": self._beta1, "_beta2": self._beta2, "_epsilon": self._epsilon}

  def tf1_non_slots(self):
    return {"beta1_power": self.beta1_power, "beta2_power": self.beta2_power}


class TF1Momentum(_TF1Optimizer):
  """tf.compat.v1.train.MomentumOptimizer(learning_rate, momentum, use_nesterov=False):
  ApplyMomentum (accum = momentum accum + g; var -= lr accum)."""
  TF1_CLASS = "MomentumOptimizer"
  SLOTS = (("momentum", 0.0),)

  def __init__(self, learning_rate, momentum, use_nesterov=False, name="TF1Momentum",
               **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self._momentum, self._use_nesterov = momentum, use_nesterov

  def update_step(self, gradient, variable, learning_rate):
    _raw.ResourceApplyMomentum(
        var=variable.handle, accum=self._slot("momentum", variable),
        lr=self._scalar(learning_rate, variable), grad=gradient,
        momentum=self._scalar(self._momentum, variable), use_nesterov=self._use_nesterov)

  def tf1_settings(self):
    return {"_momentum": self._momentum, "_use_nesterov": self._use_nesterov}


class TF1RMSProp(_TF1Optimizer):
  """tf.compat.v1.train.RMSPropOptimizer(learning_rate, decay=0.9, momentum=0.0,
  epsilon=1e-10, centered=False): ApplyRMSProp / ApplyCenteredRMSProp, `rms` starting at 1."""
  TF1_CLASS = "RMSPropOptimizer"

  def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, centered=False,
               name="TF1RMSProp", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self._decay, self._momentum, self._epsilon = decay, momentum, epsilon
    self._centered = centered
    self.SLOTS = (("rms", 1.0), ("momentum", 0.0)) + ((("mg", 0.0),) if centered else ())

  def update_step(self, gradient, variable, learning_rate):
    s = lambda value: self._scalar(value, variable)
    common = dict(var=variable.handle, ms=self._slot("rms", variable),
                  mom=self._slot("momentum", variable), lr=s(learning_rate), rho=s(self._decay),
                  momentum=s(self._momentum), epsilon=s(self._epsilon), grad=gradient)
    if self._centered:
      _raw.ResourceApplyCenteredRMSProp(mg=self._slot("mg", variable), **common)
    else:
      _raw.ResourceApplyRMSProp(**common)

  def tf1_settings(self):
    return {"_decay": self._decay, "_momentum": self._momentum, "_epsilon": self._epsilon,
            "_centered": self._centered}


class TF1Adagrad(_TF1Optimizer):
  """tf.compat.v1.train.AdagradOptimizer(learning_rate, initial_accumulator_value=0.1):
  ApplyAdagrad (accum += g^2; var -= lr g / sqrt(accum), no epsilon)."""
  TF1_CLASS = "AdagradOptimizer"

  def __init__(self, learning_rate, initial_accumulator_value=0.1, name="TF1Adagrad",
               **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self._initial_accumulator_value = initial_accumulator_value
    self.SLOTS = (("accumulator", initial_accumulator_value),)

  def update_step(self, gradient, variable, learning_rate):
    _raw.ResourceApplyAdagrad(var=variable.handle, accum=self._slot("accumulator", variable),
                              lr=self._scalar(learning_rate, variable), grad=gradient)

  def tf1_settings(self):
    return {"_initial_accumulator_value": self._initial_accumulator_value}
